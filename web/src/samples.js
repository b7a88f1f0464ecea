// The code each language starts with: short, and showing what comes back.
export const LANGUAGES = ["python", "javascript", "perl", "ruby", "shell"];

export const SAMPLES = {
  python: `# The last expression is the result. In a sandbox context, matplotlib
# figures come back as images: plt.plot([1, 3, 2]); plt.show()
import sys
print("hello from Python", sys.version.split()[0])
{"squares": [i * i for i in range(5)]}
`,
  javascript: `// The last expression is the result (objects come back as JSON).
console.log("hello from JavaScript");
({ squares: [0, 1, 2, 3, 4].map((x) => x * x) })
`,
  perl: `# The last expression is the result.
print "hello from Perl $^V\\n";
join ",", map { $_ * $_ } 0 .. 4
`,
  ruby: `# The last expression is the result.
puts "hello from Ruby #{RUBY_VERSION}"
(0..4).map { |x| x * x }
`,
  shell: `# bash, in a fresh jail per run (stateless only).
echo "hello from $(uname -s)"
ls -la /workspace
`,
};

// More to try, per language: {name, code, sandbox} (sandbox: needs a
// context, e.g. for python's figures, which only context runs return).
export const EXAMPLES = {
  python: [
    { name: "matplotlib plot", sandbox: true, code: `import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
xs = [x / 10 for x in range(63)]
import math
plt.plot(xs, [math.sin(x) for x in xs], label="sin")
plt.plot(xs, [math.cos(x) for x in xs], label="cos")
plt.legend()
plt.show()
` },
    { name: "HTML result", sandbox: true, code: `class Table:
    def _repr_html_(self):
        rows = "".join(f"<tr><td>{n}</td><td>{n * n}</td></tr>" for n in range(5))
        return f"<table border=1><tr><th>n</th><th>n²</th></tr>{rows}</table>"
Table()
` },
    { name: "keep state (run twice)", sandbox: true, code: `try:
    count += 1
except NameError:
    count = 1
f"this context has run this cell {count} time(s)"
` },
    { name: "an error", sandbox: false, code: `def divide(a, b):
    return a / b
divide(1, 0)
` },
  ],
  javascript: [
    { name: "async/await", sandbox: false, code: `const wait = (ms) => new Promise((r) => setTimeout(r, ms));
await wait(50);
({ waited: 50, at: new Date().toISOString() })
` },
  ],
  shell: [
    { name: "system info", sandbox: false, code: `id; uname -a; cat /etc/os-release | head -2; df -h /workspace
` },
  ],
};
