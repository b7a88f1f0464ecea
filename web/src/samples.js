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
