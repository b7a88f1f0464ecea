# sandboxd Perl kernel (see docs/kernel-protocol.md).
#
# Run as: /usr/bin/perl perl_kernel.pl once|repl
# fd 3 is the control socket (newline-delimited JSON); fd 1/2 carry guest output.
# Core modules only. Guest code is a string eval in package main; `our` variables and subs
# persist between cells, `my` variables do not.

# The guest eval lives first, outside any lexical scope of the kernel, so the guest sees
# no kernel lexicals and none of its pragmas (no strict, no warnings, like plain perl).
package main;
sub _sandboxd_eval_guest {
    local @_;
    eval $SandboxKernel::guest_code;
}

package SandboxKernel;
use strict;
use warnings;
use Cwd ();
use Fcntl qw(F_GETFD F_SETFD FD_CLOEXEC);
use JSON::PP ();

our $guest_code;
my $KERNEL_PID = $$;
my $seeded_after_fork;
my $pristine_cwd;    # a warmed pool member's cwd, until its request

# `exit` in guest code ends the cell, not the kernel (exit 0: no error). A forked guest
# child really exits.
BEGIN {
    *CORE::GLOBAL::exit = sub (;$) {
        my $code = @_ ? $_[0] : 0;
        CORE::exit($code) if $$ != $KERNEL_PID;
        die bless({ code => $code }, 'SandboxKernel::Exit');
    };
}

sub hard_exit { require POSIX; POSIX::_exit($_[0]); }

my $MODE = $ARGV[0] // 'once';
# A once-mode kernel ends with hard_exit right after its answer: loading POSIX
# there costs milliseconds of CPU per request (the daemon is still replying),
# so it is loaded at boot, before `ready` (in a template: once for all its
# forks). A repl kernel exits at teardown only, where start-up time matters more.
require POSIX if $MODE ne 'repl';
# A template (docs/kernel-protocol.md) is a once-mode kernel whose first read
# of fd 3 becomes the fork server (libsandboxd-forkserver is preloaded). Its
# executors are forks perl never saw: perl caches $$ and only its own fork()
# updates it, so the daemon asks them to reseed ("reseed") instead. ($$ stays
# right anyway: the template is pid 2 of its jail, each executor pid 2 of its
# namespace.)
my $TEMPLATE = $MODE eq 'zygote';
if ($TEMPLATE) {
    $MODE = 'once';
    $ARGV[0] = 'once';    # the guest sees a once-mode kernel's @ARGV either way
}
my $DEFAULT_RESULT_LIMIT = 65536;
my $WORKSPACE_ROOT = (defined $ENV{SANDBOX_WORKSPACE_ROOT} && length $ENV{SANDBOX_WORKSPACE_ROOT})
    ? $ENV{SANDBOX_WORKSPACE_ROOT} : '/workspace';
$WORKSPACE_ROOT =~ s{/+\z}{} if length($WORKSPACE_ROOT) > 1;

if ($MODE ne 'once' && $MODE ne 'repl') {
    print STDERR "usage: perl_kernel.pl once|repl\n";
    hard_exit(2);
}

open(my $ctl, '+<&=', 3) or do { print STDERR "perl_kernel: fd 3: $!\n"; hard_exit(2) };
binmode($ctl);
{
    my $flags = fcntl($ctl, F_GETFD, 0) // 0;
    fcntl($ctl, F_SETFD, $flags | FD_CLOEXEC);
}

# Wire JSON: requests are decoded to character strings, responses encoded as UTF-8.
# JSON::PP is pure Perl (decoding one request line costs ~0.1-0.3 ms), so the
# daemon's own request shape has a fast path (fast_request) and the answer is
# built by hand (json_string, encode_response); JSON::PP judges everything else.
my $WIRE = JSON::PP->new->utf8->canonical;
# Result JSON: byte strings in guest data are emitted unchanged (normally UTF-8 already).
my $RESULT_JSON = JSON::PP->new->latin1->canonical->allow_nonref;
my $CHECK_JSON = JSON::PP->new->allow_nonref;

sub send_line {
    my ($line) = @_;    # bytes
    $line .= "\n";
    my $off = 0;
    while ($off < length $line) {
        my $n = syswrite($ctl, $line, length($line) - $off, $off);
        if (!defined $n) {
            next if $!{EINTR} || $!{EAGAIN};
            hard_exit(1);
        }
        $off += $n;
    }
}

# Line reader on sysread: no PerlIO buffering and no `$.` on the control handle (which
# would otherwise show up as ", <$ctl> line N." in guest die messages).
my $rbuf = '';
sub read_line {
    while (1) {
        my $nl = index($rbuf, "\n");
        if ($nl >= 0) {
            my $line = substr($rbuf, 0, $nl + 1, '');
            return $line;
        }
        my $n = sysread($ctl, $rbuf, 65536, length $rbuf);
        if (!defined $n) {
            next if $!{EINTR};
            if ($!{EAGAIN}) { select(undef, undef, undef, 0.002); next; }
            return undef;
        }
        return undef if $n == 0;
    }
}

sub flush_guest {
    for my $fh (\*STDOUT, \*STDERR) {
        local $@;
        eval { $fh->flush if defined fileno($fh) };
    }
}

sub confined_cwd {
    my $cwd = Cwd::getcwd();
    return $WORKSPACE_ROOT unless defined $cwd;
    my $root = $WORKSPACE_ROOT eq '/' ? '' : $WORKSPACE_ROOT;
    return $cwd if $cwd eq $WORKSPACE_ROOT || index($cwd, "$root/") == 0;
    return $WORKSPACE_ROOT;
}

# Guest strings are usually UTF-8 bytes (the code is evaluated as bytes, like a script
# file without `use utf8`). Turn them into characters for the response.
sub to_chars {
    my ($s) = @_;
    $s = '' unless defined $s;
    return $s if utf8::is_utf8($s);
    my $copy = $s;
    return $copy if utf8::decode($copy);
    return $s;    # not UTF-8: treat the bytes as Latin-1 characters
}

# Bytes of the UTF-8 encoding, without encoding a copy (a result can be
# large): perl's internal form of a character string is that encoding, and
# a byte string's characters >= 0x80 take two bytes each.
sub utf8_length {
    use bytes ();
    return utf8::is_utf8($_[0]) ? bytes::length($_[0]) : length($_[0]) + ($_[0] =~ tr/\x80-\xff//);
}

sub limit_text {
    my ($limit) = @_;
    return ($limit % 1024 == 0) ? ($limit / 1024) . ' KiB' : "$limit bytes";
}

# Returns (kind, payload-characters) or () for no result.
sub map_result {
    my ($v) = @_;
    return () unless defined $v;
    # A plain value (the common result): stringifying it cannot die.
    return ('text', to_chars("$v")) unless ref $v;
    my $r = ref $v;
    if ($r eq 'HASH' || $r eq 'ARRAY') {
        my $json = eval { $RESULT_JSON->encode($v) };
        if (defined $json) {
            $json = to_chars($json);
            # JSON::PP happily writes nan/inf; only valid JSON is a json result.
            return ('json', $json) if eval { $CHECK_JSON->decode($json); 1 };
        }
    }
    my $text = eval { "$v" };
    $text = "$r" unless defined $text;
    return ('text', to_chars($text));
}

sub error_of {
    my ($e) = @_;
    my $name = ref($e) || 'PerlError';
    my $msg = eval { "$e" };
    $msg = $name unless defined $msg;
    $msg =~ s/\n+\z//;
    return { name => to_chars($name), message => to_chars($msg), traceback => [] };
}

my %ESCAPE = ('"' => '\"', '\\' => '\\\\', "\n" => '\n', "\r" => '\r', "\t" => '\t',
              "\f" => '\f', "\b" => '\b');

# A JSON string literal of characters (as JSON::PP writes it: only '"', '\' and
# control characters escaped).
sub json_string {
    my ($s) = @_;
    $s =~ s/(["\\\x00-\x1f])/$ESCAPE{$1} \/\/ sprintf('\\u%04x', ord $1)/ge;
    return '"' . $s . '"';
}

sub encode_response {
    my ($results_json, $error, $cwd) = @_;    # $results_json: characters
    my $err = 'null';
    if ($error) {    # traceback is always [] in this kernel
        $err = '{"message":' . json_string($error->{message}) . ',"name":' . json_string($error->{name})
            . ',"traceback":[]}';
    }
    my $line = '{"results":' . $results_json . ',"cwd":' . json_string(to_chars($cwd)) . ',"error":' . $err . '}';
    utf8::encode($line);    # characters → UTF-8 bytes
    return $line;
}

# The daemon's requests (compact JSON, one flat object whose values are
# strings, integers, booleans, null, or — env — a flat object of strings)
# decoded without JSON::PP: a hash like JSON::PP's (booleans as 1/0), or
# undef for anything else, which JSON::PP then decodes or rejects.
my %UNESCAPE = ('"' => '"', '\\' => '\\', '/' => '/', b => "\b", f => "\f", n => "\n", r => "\r",
                t => "\t");

# The raw contents of the string literal at pos($$ref), pos moved past it; or
# undef. (index, not a regex: a regex group repeated per escape stops at
# 65534 repetitions, and long code has that many.)
sub scan_string {
    my ($ref) = @_;
    my $start = pos($$ref) // 0;
    return undef unless substr($$ref, $start, 1) eq '"';
    my $i = $start + 1;
    while (1) {
        my $q = index($$ref, '"', $i);
        return undef if $q < 0;
        my $k = $q;
        $k-- while substr($$ref, $k - 1, 1) eq '\\';
        if (($q - $k) % 2 == 0) {    # not escaped
            pos($$ref) = $q + 1;
            return substr($$ref, $start + 1, $q - $start - 1);
        }
        $i = $q + 1;
    }
}

# A string literal's contents as characters, or undef (raw control characters,
# invalid UTF-8, unknown escapes, surrogate escapes: JSON::PP's to judge).
sub json_chars {
    my ($s) = @_;
    return undef if ($s =~ tr/\x00-\x1f//) || !utf8::decode($s);
    return $s if index($s, '\\') < 0;
    my $bad;
    $s =~ s{\\(?:u([0-9a-fA-F]{4})|([\"\\/bfnrt]))?}{
        if (defined $2) { $UNESCAPE{$2} }
        elsif (defined $1 && (hex($1) & 0xF800) != 0xD800) { chr(hex $1) }
        else { $bad = 1; '' }
    }ge;
    return $bad ? undef : $s;
}

# Members of the object at pos($$ref) (just past its '{') up to its '}'. One
# regex per member for the common shapes (sub calls cost as much as matching).
sub fast_members {
    my ($ref, $strings_only) = @_;
    my %h;
    return \%h if $$ref =~ /\G\}/gc;
    while (1) {
        $$ref =~ /\G"([^"\\\x00-\x1f]*+)":(?:"([^"\\\x00-\x1f]*+)"|(-?(?:0|[1-9][0-9]{0,14})(?=[,}])|true|false|null)|(\{))?/gc
            or return undef;
        my ($key, $str, $lit, $obj) = ($1, $2, $3, $4);
        return undef unless utf8::decode($key);
        if (defined $str) {
            return undef unless utf8::decode($str);
            $h{$key} = $str;
        } elsif (defined $lit || defined $obj) {
            return undef if $strings_only;
            $h{$key} = !defined $lit ? (fast_members($ref, 1) // return undef)
                : $lit eq 'true' ? 1 : $lit eq 'false' ? 0 : $lit eq 'null' ? undef : $lit + 0;
        } else {    # a string with escapes (code usually has some)
            my $raw = scan_string($ref) // return undef;
            $h{$key} = json_chars($raw) // return undef;
        }
        next if $$ref =~ /\G,/gc;
        return \%h if $$ref =~ /\G\}/gc;
        return undef;
    }
}

# The daemon's own line (exec_build_request: jansson, compact, this field
# order, no env): two regexes instead of one per member. Anything else goes
# to fast_members.
sub daemon_request {
    my ($ref) = @_;
    pos($$ref) = 0;
    return undef unless $$ref =~ /\G\{"code":/gc;
    my $code;
    if ($$ref =~ /\G"([^"\\\x00-\x1f]*+)"/gc) {
        $code = $1;
        return undef unless utf8::decode($code);
    } else {
        $code = json_chars(scan_string($ref) // return undef) // return undef;
    }
    $$ref =~ /\G,"env":\{\},"cwd":"([\x20-\x21\x23-\x5b\x5d-\x7e]*+)","resultLimit":(0|[1-9][0-9]{0,14}),"typescript":(true|false),"replay":(true|false)(?:,"(reseed|warmup)":true)?\}\n?\z/gc
        or return undef;
    my %h = (code => $code, env => {}, cwd => $1, resultLimit => $2 + 0, typescript => $3 eq 'true' ? 1 : 0,
             replay => $4 eq 'true' ? 1 : 0);
    $h{$5} = 1 if defined $5;
    return \%h;
}

sub fast_request {
    my ($ref) = @_;
    my $daemon = daemon_request($ref);
    return $daemon if $daemon;
    pos($$ref) = 0;
    return undef unless $$ref =~ /\G\{/gc;
    my $req = fast_members($ref, 0);
    return defined $req && $$ref =~ /\G\n?\z/gc ? $req : undef;
}

# A pool member's request is its warm-up's line with other code and
# "reseed" where the warm-up said "warmup" (the daemon builds both alike:
# pool.c, stateless.c). Once the warm-up's line was decoded in full, the
# request's tail is compared as a string: after an idle pause, matching the
# line again with daemon_request's regex costs a cold regex engine (~60 us).
my ($request_tail, %request_fields);
my $WARMUP_HEAD = '{"code":"1+1"';

sub expect_like_warmup {
    my ($line, $req) = @_;
    return unless index($line, $WARMUP_HEAD) == 0;
    my $tail = substr($line, length $WARMUP_HEAD);
    $tail =~ s/"warmup":true\}(\n?)\z/"reseed":true}$1/ or return;
    %request_fields = %$req;
    delete @request_fields{qw(code warmup)};
    $request_fields{reseed} = 1;
    $request_tail = $tail;
    # Walked once now: a sub's first call writes its pages (copy-on-write
    # faults), which belong in the warm-up, not in the request.
    my $probe = $WARMUP_HEAD . $tail;
    like_warmup(\$probe);
}

# Where the code's literal must end in a line that is the warm-up's with
# other code (its bytes after the literal are the warm-up's), or undef.
sub warmup_code_end {
    my ($ref) = @_;
    my $end = length($$ref) - length($request_tail);
    return $end > 9 && substr($$ref, $end) eq $request_tail && substr($$ref, 0, 8) eq '{"code":' ? $end : undef;
}

sub like_warmup {
    my ($ref) = @_;
    my $end = warmup_code_end($ref) // return undef;
    pos($$ref) = 8;
    my $raw = scan_string($ref);
    return undef unless defined $raw && pos($$ref) == $end;
    my $code = json_chars($raw) // return undef;
    return { %request_fields, code => $code };
}

# The leanest path, for a warmed member's request that is its warm-up's line
# with code whose literal is plain ASCII (nothing to unescape) and whose
# answer is a plain ASCII text from the cwd the warm-up left. After an idle
# pause every op runs from cold caches (the answer takes ~4.5× its
# back-to-back time), so each op left out counts. Both subs are walked in the
# warm-up (arm_plain_path), and anything else goes the general way.
my ($plain_tail, $plain_limit);
my $PLAIN_HEAD = '{"results":[{"text":"';

# The code (bytes) of such a line, or undef.
sub plain_code {
    my ($ref) = @_;
    my $end = warmup_code_end($ref) // return undef;    # just past the code's closing quote
    return undef unless substr($$ref, 8, 1) eq '"' && substr($$ref, $end - 1, 1) eq '"';
    my $code = substr($$ref, 9, $end - 10);
    return ($code =~ tr/"\\\x00-\x1f\x80-\xff//) ? undef : $code;
}

# The answer line to a value that is such a text within the limit, or undef.
sub plain_answer {
    my ($v) = @_;
    return undef unless defined $v && !ref $v;
    my $text = "$v";
    return undef if utf8::is_utf8($text) || ($text =~ tr/"\\\x00-\x1f\x80-\xff//) || length($text) > $plain_limit;
    my $cwd = Cwd::getcwd();
    return undef unless defined $cwd && $cwd eq $pristine_cwd;
    return $PLAIN_HEAD . $text . $plain_tail;
}

# After the warm-up: what the plain path answers with, and its first walk.
sub arm_plain_path {
    my $full = encode_response('[{"text":""}]', undef, confined_cwd());
    return unless index($full, $PLAIN_HEAD) == 0;
    $plain_tail = substr($full, length $PLAIN_HEAD);
    $plain_limit = result_limit($request_fields{resultLimit});
    my $probe = $WARMUP_HEAD . $request_tail;
    plain_code(\$probe);
    plain_answer(2);
}

sub set_env {
    my ($env) = @_;
    my %new;
    for my $k (keys %$env) {
        my ($kb, $vb) = ($k, $env->{$k} // '');
        utf8::encode($kb);
        utf8::encode($vb);
        $new{$kb} = $vb;
    }
    %ENV = %new;
}

# The result limit a request asks for: all digits (tr, not a regex: see
# like_warmup), else the default.
sub result_limit {
    my ($limit) = @_;
    return $limit if defined $limit && !ref $limit && length $limit && ($limit =~ tr/0-9//) == length $limit
        && $limit > 0;
    return $DEFAULT_RESULT_LIMIT;
}

sub handle {
    my ($req) = @_;
    # A pool member's warm-up runs after its fork (docs/kernel-protocol.md):
    # seeding there already gave this process its own sequence, so the real
    # request's reseed costs nothing (srand reads /dev/urandom: 3 syscalls).
    if ($req->{warmup}) { srand(); $seeded_after_fork = 1; }
    elsif ($req->{reseed} && !$seeded_after_fork) { srand(); }
    my $env = ref $req->{env} eq 'HASH' ? $req->{env} : {};
    # A pool member's warm-up (env {} as well) emptied %ENV already.
    set_env($env) if %$env || %ENV;
    my $limit = result_limit($req->{resultLimit});

    my $cwd = $req->{cwd};
    # A pool member is still where its warm-up went (only the daemon's "1+1"
    # ran since): the chdir would change nothing.
    if (defined $cwd && length $cwd && !(defined $pristine_cwd && $cwd eq $pristine_cwd)) {
        utf8::encode($cwd);
        unless (chdir $cwd) {
            my $err = { name => 'PerlError', message => to_chars("cannot chdir to $cwd: $!"), traceback => [] };
            return encode_response('[]', $err, confined_cwd());
        }
    }
    my $code = $req->{code} // '';
    utf8::encode($code);
    return answer($limit, eval_guest($code));
}

# Runs the guest's code (bytes): (value, failed, error). A forked guest
# child never gets past it.
sub eval_guest {
    $guest_code = "#line 1 \"<sandbox>\"\n" . $_[0];
    my ($value, $failed, $err);
    {
        local $@;
        $value = main::_sandboxd_eval_guest();
        if (ref $@ || (defined $@ && length $@)) {
            $failed = 1;
            $err = $@;
        }
    }
    flush_guest();
    if ($$ != $KERNEL_PID) {    # a forked guest child must never answer on fd 3
        hard_exit($failed ? 1 : 0);
    }
    return ($value, $failed, $err);
}

# The answer line (bytes) to an evaluation. @_ holds the value itself (not a
# copy), dropped before the answer is built.
sub answer {
    my ($limit, undef, $failed, $err) = @_;
    if ($failed && ref $err eq 'SandboxKernel::Exit') {
        my $code = $err->{code} // 0;
        $_[1] = $err = undef;
        $failed = 0;
        if ($code) {
            return encode_response('[]', { name => 'PerlError', message => "exit $code",
                                           traceback => [] }, confined_cwd());
        }
    }
    if ($failed) {
        my $e = error_of($err);
        $_[1] = $err = undef;
        return encode_response('[]', $e, confined_cwd());
    }
    my @mapped = map_result($_[1]);
    $_[1] = undef;
    return encode_response('[]', undef, confined_cwd()) unless @mapped;
    my ($kind, $payload) = @mapped;
    if (utf8_length($payload) > $limit) {
        my $e = { name => 'ExecutionLimitError',
                  message => 'Result limit exceeded (' . limit_text($limit) . ')', traceback => [] };
        return encode_response('[]', $e, confined_cwd());
    }
    my $entry = $kind eq 'json'
        ? '[{"json":' . $payload . '}]'
        : '[{"text":' . json_string($payload) . '}]';
    return encode_response($entry, undef, confined_cwd());
}

# Perl numbers string evals: a guest's nested eval dies "at (eval N)". A
# pool member's warm-up evaluates one string, so a once-mode kernel that is
# not warmed up evaluates as many (one started cold at boot, one forked from
# a template on demand before its request): the guest sees the same N on
# every path.
my $WARMUP_EVALS = 1;
my $warm_evals = 0;

sub number_evals_as_warmed {
    local $@;
    eval '1' while $warm_evals++ < $WARMUP_EVALS;
}

# A warmed pool member makes its whole heap its own before it is published.
# The warm-up's walk leaves 4 pages of the template's heap shared that the
# real request still writes (perl's allocator does not hand out the same
# chunks twice): each is a copy-on-write fault on the request path, ~15 µs
# apiece after an idle pause (traced, bench/idle_segments.py). Copying all
# of it here (MADV_POPULATE_WRITE, ~4 MiB, ~0.4 ms of the refill's CPU)
# moves them off that path. Best effort: elsewhere than x86_64 (the syscall
# number), without /proc or without that advice (Linux < 5.14) the request
# just takes its faults.
my %MADVISE_NR = (x86_64 => 28);
my $MADV_POPULATE_WRITE = 23;

sub own_heap {
    no warnings 'portable';    # 64-bit addresses in hex()
    local $!;                  # sysread, not <>: the guest's $. stays the other paths'
    my $nr = $MADVISE_NR{(POSIX::uname())[4]} // return;
    open(my $maps, '<', '/proc/self/maps') or return;
    my $text = '';
    1 while sysread($maps, $text, 65536, length $text);
    close $maps;
    return unless $text =~ /^([0-9a-f]+)-([0-9a-f]+) rw-p [^\n]*\[heap\]$/m;
    my ($start, $end) = (hex $1, hex $2);
    syscall($nr, $start, $end - $start, $MADV_POPULATE_WRITE);
}

sub main {
    # Warm up the real path once so the first request pays no lazy loading.
    handle({ code => '1+1', env => { %ENV } });
    number_evals_as_warmed() if $MODE eq 'once' && !$TEMPLATE;
    send_line('{"ready":true}');
    while (1) {
        my $line = read_line();
        last unless defined $line;
        if (defined $plain_tail) {    # a warmed member's request (once mode)
            my $code = plain_code(\$line);
            if (defined $code) {
                my @run = eval_guest($code);
                # (a failed eval's value is undef: no plain answer)
                send_line(plain_answer($run[0]) // answer($plain_limit, @run));
                last;
            }
        }
        next unless $line =~ /\S/;
        my $req = (defined $request_tail ? like_warmup(\$line) : undef) // fast_request(\$line)
            // eval { $WIRE->decode($line) };
        if (ref $req ne 'HASH') {
            my $msg = $@ || 'request must be an object';
            $msg =~ s/\s+\z//;
            send_line(encode_response('[]', { name => 'EngineError', message => "bad request: $msg",
                                              traceback => [] }, confined_cwd()));
            last if $MODE eq 'once';
            next;
        }
        # A template's pool member serves one request of the daemon's before
        # it is published, so the copy-on-write faults of the request path
        # happen off that path. It does not count, but walks every step the
        # request will (a sub's first call writes its CV's page).
        my $warmup = $MODE eq 'once' && $req->{warmup};
        $warm_evals = $WARMUP_EVALS if $warmup;
        number_evals_as_warmed() if $MODE eq 'once';
        my $response = handle($req);
        own_heap() if $warmup && $seeded_after_fork;    # before the daemon may publish it
        send_line($response);
        undef $pristine_cwd;
        if ($warmup) {
            expect_like_warmup($line, $req);
            $pristine_cwd = $req->{cwd} if defined $req->{cwd} && length $req->{cwd} && confined_cwd() eq $req->{cwd};
            arm_plain_path() if defined $request_tail && defined $pristine_cwd && $seeded_after_fork;
            next;
        }
        last if $MODE eq 'once';
    }
    flush_guest();
    # A once-mode kernel waits after its answer for the daemon's kill (or
    # EOF): exiting by itself, it freed its memory right when the daemon woke
    # to read the answer, on the same CPU (docs/kernel-protocol.md).
    if ($MODE eq 'once') {
        1 while defined read_line();
    }
    hard_exit(0);
}

main();
