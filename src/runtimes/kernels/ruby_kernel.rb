# sandboxd Ruby kernel (see docs/kernel-protocol.md).
#
# Run as: /usr/bin/ruby --disable-gems ruby_kernel.rb once|repl
# fd 3 is the control socket (newline-delimited JSON); fd 1/2 carry guest output.
# Guest code is evaluated against TOPLEVEL_BINDING, so locals, methods and constants persist
# between cells. This file must not create top-level locals (they would be visible there).
require 'json'

module SandboxKernel
  CTL_FD = 3
  SANDBOX_FILE = '<sandbox>'
  DEFAULT_RESULT_LIMIT = 65536
  KERNEL_FILE = File.expand_path(__FILE__)
  NEVER_ESCAPE = /\A#{Regexp.escape(SANDBOX_FILE)}:\d+: (?:Can't escape from eval with (break|next|redo)|Invalid (break|next|redo|retry))\s*\z/

  class << self
    attr_reader :mode

    def setup(mode)
      @mode = mode
      @pid = Process.pid
      root = ENV['SANDBOX_WORKSPACE_ROOT']
      root = '/workspace' if root.nil? || root.empty?
      root = root.sub(%r{/+\z}, '') if root.length > 1
      @root = root
      @ctl = IO.for_fd(CTL_FD, 'r+', autoclose: false)
      @ctl.close_on_exec = true
      @ctl.binmode
      @ctl.sync = true
    end

    def send_line(line)
      @ctl.write(line + "\n")
    end

    def flush_guest
      [$stdout, $stderr, STDOUT, STDERR].uniq.each do |io|
        io.flush if io.respond_to?(:flush) && !(io.respond_to?(:closed?) && io.closed?)
      rescue StandardError
        nil
      end
    end

    def confined_cwd
      cwd = begin
        Dir.pwd
      rescue StandardError
        return @root
      end
      prefix = @root == '/' ? '/' : "#{@root}/"
      return cwd if cwd == @root || cwd.start_with?(prefix)

      @root
    end

    def utf8(str)
      s = str.to_s.dup
      s.force_encoding(Encoding::UTF_8) if s.encoding == Encoding::ASCII_8BIT || s.encoding == Encoding::US_ASCII
      s = s.encode(Encoding::UTF_8, invalid: :replace, undef: :replace) unless s.encoding == Encoding::UTF_8
      s.valid_encoding? ? s : s.scrub
    end

    def limit_text(limit)
      (limit % 1024).zero? ? "#{limit / 1024} KiB" : "#{limit} bytes"
    end

    # Returns [kind, payload] or nil for no result.
    def map_result(value)
      return nil if value.nil?

      if value.is_a?(Hash) || value.is_a?(Array)
        begin
          return [:json, JSON.generate(value)]
        rescue StandardError, SystemStackError
          nil
        end
      end
      [:text, utf8(value.inspect)]
    end

    def guest_backtrace(exc)
      lines = []
      (exc.backtrace || []).each do |line|
        break if line.start_with?(KERNEL_FILE)

        lines << utf8(line)
      end
      lines
    end

    def error_of(exc)
      name = exc.class.name || exc.class.to_s
      message = begin
        exc.message.to_s
      rescue StandardError
        name
      end
      if exc.is_a?(SyntaxError) && (m = NEVER_ESCAPE.match(message))
        return { 'name' => 'LocalJumpError', 'message' => "unexpected #{m[1] || m[2]}",
                 'traceback' => ["#{SANDBOX_FILE}:#{message[/\A[^:]+:(\d+)/, 1]}:in `<main>'"] }
      end
      { 'name' => utf8(name), 'message' => utf8(message), 'traceback' => guest_backtrace(exc) }
    end

    def response(results_json, error)
      %({"results":#{results_json},"error":#{error.nil? ? 'null' : JSON.generate(error)},"cwd":#{JSON.generate(utf8(confined_cwd))}})
    end

    def replace_env(env)
      # Every ENV write is a setenv(3): an environment that already is the
      # requested one, keys in the same order, is left alone (the usual case: a
      # pool member booted with the env the daemon sends).
      return if ENV.to_a == env.to_a

      ENV.clear
      env.each do |k, v|
        ENV[k.to_s] = v.to_s
      rescue StandardError
        nil # a name or value the OS cannot hold ("=" or NUL): skipped
      end
    end

    def handle(req)
      srand if req['reseed']
      env = req['env'].is_a?(Hash) ? req['env'] : {}
      replace_env(env)
      limit = req['resultLimit']
      limit = DEFAULT_RESULT_LIMIT unless limit.is_a?(Integer) && limit.positive?
      code = req['code'].is_a?(String) ? req['code'] : ''
      value = nil
      failure = nil
      begin
        cwd = req['cwd']
        Dir.chdir(cwd) if cwd.is_a?(String) && !cwd.empty?
        value = TOPLEVEL_BINDING.eval(code, SANDBOX_FILE, 1)
      rescue Exception => e # rubocop:disable Lint/RescueException -- SystemExit, ScriptError too
        failure = e
      end
      flush_guest
      Process.exit!(failure ? 1 : 0) if Process.pid != @pid # a forked guest child never answers
      return response('[]', error_of(failure)) if failure

      mapped = begin
        map_result(value)
      rescue Exception => e # rubocop:disable Lint/RescueException
        return response('[]', error_of(e))
      end
      return response('[]', nil) if mapped.nil?

      kind, payload = mapped
      if payload.bytesize > limit
        return response('[]', { 'name' => 'ExecutionLimitError',
                                'message' => "Result limit exceeded (#{limit_text(limit)})", 'traceback' => [] })
      end
      entry = kind == :json ? %([{"json":#{payload}}]) : %([{"text":#{JSON.generate(payload)}}])
      response(entry, nil)
    end

    def serve
      # Warm up the real path once so the first request pays no lazy loading.
      handle({ 'code' => '1+1', 'env' => ENV.to_h })
      send_line('{"ready":true}')
      while (line = @ctl.gets)
        next if line.strip.empty?

        req = begin
          JSON.parse(line)
        rescue JSON::ParserError => e
          e
        end
        unless req.is_a?(Hash)
          msg = req.is_a?(Exception) ? req.message : 'request must be an object'
          send_line(response('[]', { 'name' => 'EngineError', 'message' => utf8("bad request: #{msg}"),
                                     'traceback' => [] }))
          break if @mode == 'once'

          next
        end
        send_line(handle(req))
        break if @mode == 'once'
      end
      flush_guest
      # A once-mode kernel waits after its answer for the daemon's kill (or
      # EOF): exiting by itself, it freed its memory right when the daemon
      # woke to read the answer, on the same CPU (docs/kernel-protocol.md).
      nil while @mode == 'once' && @ctl.gets
      Process.exit!(0)
    end
  end
end

unless %w[once repl].include?(ARGV[0] || 'once')
  warn 'usage: ruby_kernel.rb once|repl'
  Process.exit!(2)
end
SandboxKernel.setup(ARGV[0] || 'once')
SandboxKernel.serve
