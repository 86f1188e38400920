# Every part of beaneater's API (Debian's ruby-beaneater 1.1.1, unmodified) against a beanstalkd
# protocol server: the tube collection (all, each, used, watched, use, watch, watch!, ignore, find
# and []), a tube's put with pri/delay/ttr, peek of each state, kick, pause, stats, reserve and
# clear; tubes.reserve with and without a timeout, a float one too (nothing ready:
# Beaneater::TimedOutError);
# jobs.find/peek/[] by id (a missing id gives nil); every Job method (bury, release with a delay,
# touch, delete, kick, stats, ttr, pri, delay, tube, reserved?, exists?; the state is read from
# stats, since 1.1.1 has no Job#state); jobs.register + jobs.process! with a bounded count (a
# processor that stops the loop itself, one that is retried after a release, one that fails and
# gets its job buried); the connection's stats object (numbers as Integers); and the error class
# the client maps each error reply to (InvalidTubeName, NotFoundError, JobTooBigError,
# NotIgnoredError, DeadlineSoonError, BadFormatError, UnknownCommandError, ExpectedCrlfError,
# JobNotReserved, NotConnected).
# A job put or released with a delay of 1 s, or in a tube paused for 1 s, must not be reserved
# before that second is over (counted from when the command was sent), and every job is received
# exactly once. The scenario expects a fresh server: it compares the
# server-wide counters with what it did itself.
# Usage: ruby scenario.rb PORT   (exits 0 on success; prints "FAIL: why" and exits 1 on the first
# failure; gives up with a FAIL after 25 s).

require 'beaneater'
require 'timeout'

def fail!(why)
  $stderr.puts "FAIL: #{why}"
  $stderr.flush
  exit 1
end

unless ARGV.size == 1 && ARGV[0] =~ /\A\d+\z/
  $stderr.puts 'usage: ruby scenario.rb PORT'
  exit 2
end
ADDR = "127.0.0.1:#{ARGV[0]}"

def check(ok, why)
  fail!(why) unless ok
end

def same(got, want, what)
  fail!("#{what}: got #{got.inspect}, want #{want.inspect}") unless got == want
end

# Runs the block, which must raise klass (or a subclass); returns the exception.
def raises(klass, what)
  begin
    yield
  rescue klass => e
    return e
  rescue Exception => e
    raise if e.is_a?(SystemExit)
    fail!("#{what}: raised #{e.class} (#{e.message}), want #{klass}")
  end
  fail!("#{what}: raised nothing, want #{klass}")
end

# The wall clock, which delayqd keeps due times on: where it steps forward, a delayed job comes
# sooner by a monotonic clock, and on time by this one.
def now
  Process.clock_gettime(Process::CLOCK_REALTIME)
end

$connections = 0 # connections this scenario opened: the server must count exactly these
$inserted = 0    # jobs put successfully

def connect
  $connections += 1
  Beaneater.new(ADDR)
end

def put(tube, body, opts = {})
  r = tube.put(body, opts)
  same(r[:status], 'INSERTED', "put #{body[0, 20].inspect} to #{tube.name}: status")
  check(r[:id].is_a?(String) && r[:id] =~ /\A[1-9]\d*\z/, "put to #{tube.name}: id #{r[:id].inspect}")
  $inserted += 1
  r[:id]
end

def job_is(job, id, body, what)
  check(job.is_a?(Beaneater::Job), "#{what}: got #{job.inspect}, want job #{id}")
  same(job.id, id, "#{what}: id")
  same(job.body.b, body.b, "#{what}: body of job #{id}")
end

JOB_KEYS = %w(id tube state pri age delay ttr time_left file reserves timeouts releases buries kicks)
def job_stats(job, want, what)
  s = job.stats
  check(s.is_a?(Beaneater::StatStruct), "#{what}: stats-job #{job.id} gave #{s.inspect}")
  JOB_KEYS.each { |k| check(s.keys.include?(k), "#{what}: stats-job #{job.id} has no #{k}: #{s.inspect}") }
  (JOB_KEYS - %w(tube state)).each do |k|
    check(s[k].is_a?(Integer) && s[k] >= 0, "#{what}: stats-job #{job.id} #{k} is #{s[k].inspect}, not a number")
  end
  same(s.id.to_s, job.id, "#{what}: stats-job id")
  want.each { |k, v| same(s[k.to_s], v, "#{what}: stats-job #{job.id} #{k}") }
  s
end

TUBE_KEYS = %w(current_jobs_urgent current_jobs_ready current_jobs_reserved current_jobs_delayed
               current_jobs_buried total_jobs current_using current_watching current_waiting
               cmd_delete cmd_pause_tube pause pause_time_left)
def tube_stats(tube, want, what)
  s = tube.stats
  same(s.name.to_s, tube.name, "#{what}: stats-tube name")
  TUBE_KEYS.each do |k|
    check(s[k].is_a?(Integer) && s[k] >= 0, "#{what}: stats-tube #{tube.name} #{k} is #{s[k].inspect}, not a number")
  end
  want.each { |k, v| same(s[k.to_s], v, "#{what}: stats-tube #{tube.name} #{k}") }
  s
end

def watched(client)
  client.tubes.watched.map(&:name)
end

# reserve(0) must come back at once with TimedOutError.
def nothing_ready(client, what)
  t = now
  raises(Beaneater::TimedOutError, "#{what}: reserve(0)") { client.tubes.reserve(0) }
  check(now - t < 0.9, "#{what}: reserve(0) took #{(now - t).round(3)} s")
end

# reserve(timeout) of a job due at not_before (a client moment no later than the server's due time).
def reserve_due(client, id, body, not_before, what, timeout = 3)
  job = client.tubes.reserve(timeout)
  t = now
  job_is(job, id, body, what)
  check(t >= not_before, "#{what}: job #{id} reserved #{((not_before - t) * 1000).round} ms early")
  job
end

RUN = "bz#{Process.pid}"
def tname(s)
  "#{RUN}-#{s}"
end

class RetryMe < StandardError; end

begin
  Timeout.timeout(25) do
    # ---------------------------------------------------------------- connection and its stats
    bz = connect
    other = connect
    st = bz.stats # a live object: each read sends a stats command
    stats_numeric = %w(current_jobs_urgent current_jobs_ready current_jobs_reserved current_jobs_delayed
                       current_jobs_buried cmd_put cmd_peek cmd_peek_ready cmd_peek_delayed cmd_peek_buried
                       cmd_reserve cmd_reserve_with_timeout cmd_delete cmd_release cmd_use cmd_watch cmd_ignore
                       cmd_bury cmd_kick cmd_touch cmd_stats cmd_stats_job cmd_stats_tube cmd_list_tubes
                       cmd_list_tube_used cmd_list_tubes_watched cmd_pause_tube job_timeouts total_jobs
                       max_job_size current_tubes current_connections current_producers current_workers
                       current_waiting total_connections pid uptime binlog_oldest_index binlog_current_index
                       binlog_records_migrated binlog_records_written binlog_max_size)
    stats_numeric.each do |k|
      check(st.keys.include?(k), "stats: no #{k} in #{st.keys.inspect}")
      check(st[k].is_a?(Integer) && st[k] >= 0, "stats: #{k} is #{st[k].inspect}, not a number")
    end
    %w(rusage_utime rusage_stime).each do |k|
      check(st[k].is_a?(Numeric) && st[k] >= 0, "stats: #{k} is #{st[k].inspect}, not a number")
    end
    %w(version id hostname platform draining os).each { |k| check(st.keys.include?(k), "stats: no #{k}") }
    check(st.version.to_s.start_with?('1.12'), "stats: version #{st.version.inspect}")
    same(st.draining, false, 'stats: draining')
    same(st.max_job_size, 65535, 'stats: max_job_size')
    same(st.current_connections, 2, 'stats: current_connections')
    same(st.total_connections, 2, 'stats: total_connections')
    same(st.current_jobs_ready, 0, 'stats: current_jobs_ready of a fresh server')
    same(st.total_jobs, 0, 'stats: total_jobs of a fresh server')
    same(st.current_tubes, 1, 'stats: current_tubes')
    same(bz.stats['current_jobs_ready'], 0, "stats['current_jobs_ready']")
    same(bz.stats[:uptime].class, Integer, 'stats[:uptime]')
    n = bz.stats.cmd_stats
    same(bz.stats.cmd_stats, n + 1, 'stats: cmd_stats (each read of the stats object is one stats command)')
    check(bz.stats.inspect.include?('current_jobs_ready'), 'stats.inspect')

    # ---------------------------------------------------------------- tubes: use, watch, ignore
    ta, tb, tc = tname('a'), tname('b'), tname('c')
    same(bz.tubes.used.name, 'default', 'tubes.used at start')
    same(watched(bz), ['default'], 'tubes.watched at start')
    same(bz.tubes.all.map(&:name), ['default'], 'tubes.all at start')
    same(bz.tubes.map(&:name), ['default'], 'tubes.each at start')
    bz.tubes.use(ta)
    same(bz.tubes.used.name, ta, 'tubes.used after use')
    same(bz.tubes.all.map(&:name).sort, ['default', ta].sort, 'tubes.all after use')
    bz.tubes.watch(tb, tc)
    same(watched(bz).sort, ['default', tb, tc].sort, 'tubes.watched after watch')
    same(bz.connection.tubes_watched.sort, ['default', tb, tc].sort, 'connection.tubes_watched')
    bz.tubes.ignore('default')
    same(watched(bz).sort, [tb, tc].sort, 'tubes.watched after ignore')
    bz.tubes.watch!(ta)
    same(watched(bz), [ta], 'tubes.watched after watch!')
    e = raises(Beaneater::NotIgnoredError, 'ignore of the last watched tube') { bz.tubes.ignore(ta) }
    same(e.status, 'NOT_IGNORED', 'NotIgnoredError status')
    same(watched(bz), [ta], 'tubes.watched after a refused ignore')
    # tb and tc were dropped once nobody watched them
    same(bz.tubes.all.map(&:name).sort, ['default', ta].sort, 'tubes.all after the ignores')
    tube_a = bz.tubes.find(ta)
    same(tube_a.name, ta, 'tubes.find name')
    same(bz.tubes[ta].name, ta, 'tubes[] name')
    tube_stats(tube_a, { current_using: 1, current_watching: 1, total_jobs: 0 }, 'fresh tube')
    tube_stats(bz.tubes['default'], { current_using: 1, current_watching: 1 }, 'default tube')

    # ---------------------------------------------------------------- put, peek, find, job stats
    check(tube_a.peek(:ready).nil?, 'peek(:ready) of an empty tube')
    check(tube_a.peek(:delayed).nil?, 'peek(:delayed) of an empty tube')
    check(tube_a.peek(:buried).nil?, 'peek(:buried) of an empty tube')
    id1 = put(tube_a, 'hello', pri: 10, delay: 0, ttr: 30)
    t0 = now
    id2 = put(tube_a, 'later', pri: 5, delay: 1, ttr: 20)
    j1 = bz.jobs.find(id1)
    job_is(j1, id1, 'hello', 'jobs.find')
    job_is(bz.jobs.peek(id1), id1, 'hello', 'jobs.peek')
    job_is(bz.jobs[id1], id1, 'hello', 'jobs[]')
    job_is(other.jobs.find(id1), id1, 'hello', 'jobs.find from another connection')
    same(j1.reserved, false, 'found job: reserved')
    same(j1.reserved?, false, 'found job: reserved?')
    same(j1.exists?, true, 'found job: exists?')
    same(j1.pri, 10, 'job.pri')
    same(j1.ttr, 30, 'job.ttr')
    same(j1.delay, 0, 'job.delay')
    same(j1.tube, ta, 'job.tube')
    job_stats(j1, { tube: ta, state: 'ready', pri: 10, delay: 0, ttr: 30, reserves: 0, time_left: 0 }, 'ready job')
    j2 = bz.jobs.find(id2)
    s2 = job_stats(j2, { tube: ta, state: 'delayed', pri: 5, delay: 1, ttr: 20 }, 'delayed job')
    check(s2.time_left <= 1, "delayed job: time_left #{s2.time_left}")
    job_is(tube_a.peek(:ready), id1, 'hello', 'peek(:ready)')
    job_is(tube_a.peek(:delayed), id2, 'later', 'peek(:delayed)')
    check(tube_a.peek(:buried).nil?, 'peek(:buried) with none buried')
    check(bz.jobs.find(999_999).nil?, 'jobs.find of a missing id')
    check(bz.jobs.peek('424242').nil?, 'jobs.peek of a missing id')
    tube_stats(tube_a, { current_jobs_ready: 1, current_jobs_delayed: 1, current_jobs_urgent: 1,
                         current_jobs_reserved: 0, current_jobs_buried: 0, total_jobs: 2 }, 'after two puts')
    same(bz.stats.current_jobs_delayed, 1, 'stats: current_jobs_delayed')
    same(bz.stats.current_jobs_urgent, 1, 'stats: current_jobs_urgent')

    # ---------------------------------------------------------------- reserve, touch, delayed reserve
    raises(Beaneater::JobNotReserved, 'bury of an unreserved job') { j1.bury }
    raises(Beaneater::JobNotReserved, 'release of an unreserved job') { j1.release }
    raises(Beaneater::JobNotReserved, 'touch of an unreserved job') { j1.touch }
    r1 = bz.tubes.reserve(5)
    job_is(r1, id1, 'hello', 'reserve(5) with a ready job')
    same(r1.reserved, true, 'reserved job: reserved')
    same(r1.reserved?, true, 'reserved job: reserved?')
    job_stats(r1, { state: 'reserved', reserves: 1 }, 'reserved job')
    same(j1.reserved?, true, 'found job once reserved: reserved? (from stats)')
    same(r1.touch[:status], 'TOUCHED', 'touch')
    check(r1.stats.time_left.between?(28, 30), "touched job: time_left #{r1.stats.time_left}")
    # another connection sees the job reserved but may not touch it
    oj = other.jobs.find(id1)
    same(oj.reserved?, true, "another connection's view: reserved?")
    e = raises(Beaneater::NotFoundError, "touch of another connection's job") { oj.touch }
    same(e.status, 'NOT_FOUND', 'NotFoundError status')
    same(e.cmd, "touch #{id1}", 'NotFoundError cmd')
    tube_stats(tube_a, { current_jobs_reserved: 1, current_jobs_ready: 0 }, 'one reserved')
    nothing_ready(bz, 'delayed job not yet due') if now - t0 < 0.8
    r2 = reserve_due(bz, id2, 'later', t0 + 1.0, 'reserve of a job put with delay 1')
    job_stats(r2, { state: 'reserved', reserves: 1, delay: 1 }, 'reserved delayed job')

    # ---------------------------------------------------------------- release with delay, bury, kick
    t1 = now
    same(r2.release(delay: 1)[:status], 'RELEASED', 'release with delay 1')
    same(r2.reserved, false, 'released job: reserved')
    same(r2.reserved?, false, 'released job: reserved?')
    job_stats(r2, { state: 'delayed', releases: 1, delay: 1, pri: 5 }, 'released job')
    job_is(tube_a.peek(:delayed), id2, 'later', 'peek(:delayed) of the released job')
    nothing_ready(bz, 'released job not yet due') if now - t1 < 0.8
    r2 = reserve_due(bz, id2, 'later', t1 + 1.0, 'reserve of a job released with delay 1')
    same(r2.bury[:status], 'BURIED', 'bury')
    same(r2.reserved?, false, 'buried job: reserved?')
    job_stats(r2, { state: 'buried', buries: 1, pri: 5 }, 'buried job')
    job_is(tube_a.peek(:buried), id2, 'later', 'peek(:buried)')
    same(r2.kick[:status], 'KICKED', 'job.kick')
    job_stats(r2, { state: 'ready', kicks: 1 }, 'kicked job')
    r2 = bz.tubes.reserve(1)
    job_is(r2, id2, 'later', 'reserve of the kicked job')
    same(r2.bury(pri: 7)[:status], 'BURIED', 'bury with pri 7')
    job_stats(r2, { state: 'buried', buries: 2, pri: 7 }, 'buried again')
    k = tube_a.kick(5)
    same(k[:status], 'KICKED', 'tube.kick status')
    same(k[:id], '1', 'tube.kick count')
    same(tube_a.kick(5)[:id], '0', 'tube.kick with nothing buried')
    job_stats(r2, { state: 'ready', kicks: 2 }, 'kicked by tube.kick')
    e = raises(Beaneater::NotFoundError, 'job.kick of a ready job') { bz.jobs.find(id2).kick }
    same(e.cmd, "kick-job #{id2}", 'kick-job NotFoundError cmd')
    same(r1.delete[:status], 'DELETED', 'delete of a reserved job')
    same(r1.exists?, false, 'deleted job: exists?')
    check(bz.jobs.find(id1).nil?, 'jobs.find of a deleted job')
    raises(Beaneater::NotFoundError, 'delete of a deleted job') { r1.delete }
    same(bz.jobs.find(id2).delete[:status], 'DELETED', 'delete of a ready job')
    tube_stats(tube_a, { current_jobs_ready: 0, current_jobs_reserved: 0, current_jobs_delayed: 0,
                         current_jobs_buried: 0, total_jobs: 2, cmd_delete: 2 }, 'tube a emptied')

    # ---------------------------------------------------------------- each job exactly once
    tube_e = bz.tubes[tname('e')]
    bz.tubes.watch!(tube_e.name)
    te = now
    want = {}
    [[100, 0], [3, 0], [50, 1], [1, 1], [7, 0], [2000, 1]].each_with_index do |(pri, delay), i|
      body = "once-#{i}-\r\n\x00\xff".b
      id = put(tube_e, body, pri: pri, delay: delay, ttr: 10)
      want[id] = [body, pri, delay]
    end
    got = []
    until got.size == want.size
      job = bz.tubes.reserve(3)
      t = now
      check(want.key?(job.id), "exactly once: unknown job #{job.id}")
      check(!got.include?(job.id), "exactly once: job #{job.id} received twice")
      body, _pri, delay = want[job.id]
      same(job.body.b, body, "exactly once: body of job #{job.id}")
      check(t >= te + delay, "exactly once: job #{job.id} (delay #{delay}) reserved #{((te + delay - t) * 1000).round} ms early")
      got << job.id
      job.delete
    end
    ready_order = want.select { |_, v| v[2] == 0 }.sort_by { |_, v| v[1] }.map(&:first)
    same(got.first(3), ready_order, 'exactly once: ready jobs in priority order')
    nothing_ready(bz, 'exactly once: after all jobs')
    # A timeout given as a float, as a worker started with process!(reserve_timeout: 0.5) sends
    # it ("reserve-with-timeout 0.5"): the whole seconds count, so 0.5 answers at once.
    t = now
    raises(Beaneater::TimedOutError, 'reserve(0.5)') { bz.tubes.reserve(0.5) }
    check(now - t < 0.9, "reserve(0.5) took #{(now - t).round(3)} s")

    # reserve without a timeout: a job that is ready, then one that is due in 1 s
    id = put(tube_e, 'blocking-1')
    job = bz.tubes.reserve
    job_is(job, id, 'blocking-1', 'reserve with no timeout, job ready')
    job.delete
    tb0 = now
    id = put(tube_e, 'blocking-2', delay: 1)
    yielded = nil
    job = bz.tubes.reserve { |jb| yielded = jb }
    check(now >= tb0 + 1.0, "reserve with no timeout: delayed job came #{((tb0 + 1.0 - now) * 1000).round} ms early")
    job_is(job, id, 'blocking-2', 'reserve with no timeout, delayed job')
    check(yielded.equal?(job), 'reserve with a block: block got the job')
    job.delete

    # ---------------------------------------------------------------- tube.reserve, pause
    # Sixteen tubes paused for 1 s, 10 ms apart, each with its own worker waiting in tube.reserve
    # (watch! the tube, then reserve): no job may come before 1 s after its pause-tube was sent.
    # Sixteen tries, since a pause that ends a fraction of a millisecond early is caught only now
    # and then.
    Thread.report_on_exception = false
    paused = (1..16).map do |i|
      tube = bz.tubes[tname("p#{i}")]
      [tube, put(tube, "paused-#{i}"), connect]
    end
    started = paused.map do |tube, _id, _w|
      sleep 0.01
      tp = now
      same(tube.pause(1)[:status], 'PAUSED', 'pause')
      tp
    end
    # The tube paused last: the first one's second may be over by now on a loaded machine, and
    # the last one's too if the machine stalled for most of a second: then its pause is not read.
    want = { cmd_pause_tube: 1, current_jobs_ready: 1 }
    want[:pause] = 1 if now - started[-1] < 0.9
    sp = tube_stats(paused[-1][0], want, 'paused tube')
    check(sp.pause_time_left <= 1, "paused tube: pause_time_left #{sp.pause_time_left}")
    got = paused.map { |tube, _id, w| Thread.new { [w.tubes[tube.name].reserve(3), now] } }.map(&:value)
    paused.each_with_index do |(tube, id, w), i|
      job, t = got[i]
      job_is(job, id, "paused-#{i + 1}", 'tube.reserve of a paused tube')
      check(t >= started[i] + 1.0,
            "paused tube #{tube.name}: job reserved #{((started[i] + 1.0 - t) * 1e6).round} us before 1 s after pause-tube was sent")
      same(watched(w), [tube.name], 'tube.reserve: watched')
      job.delete
      w.close
    end
    # the other tubes are gone (no job, no user, no watcher); bz still uses the last one
    same(paused[-1][0].pause(0)[:status], 'PAUSED', 'pause 0')
    tube_stats(paused[-1][0], { pause: 0, pause_time_left: 0, cmd_pause_tube: 2 }, 'tube after pause 0')

    # ---------------------------------------------------------------- TTR: DEADLINE_SOON, lapse
    tube_t = bz.tubes[tname('t')]
    bz.tubes.watch!(tube_t.name)
    id0 = put(tube_t, 'ttr0', ttr: 0)
    same(bz.jobs.find(id0).ttr, 1, 'put with ttr 0: ttr (raised to 1)')
    same(bz.jobs.find(id0).delete[:status], 'DELETED', 'delete of the ttr-0 job')
    id = put(tube_t, 'ttr', ttr: 2)
    tr = now
    job = bz.tubes.reserve(1)
    job_is(job, id, 'ttr', 'reserve of a ttr-2 job')
    # a reserve that waits while the held job enters its last second ends with DEADLINE_SOON
    e = raises(Beaneater::DeadlineSoonError, 'reserve(5) waiting while a held job nears its deadline') { bz.tubes.reserve(5) }
    same(e.status, 'DEADLINE_SOON', 'DeadlineSoonError status')
    check(now - tr >= 0.9 && now - tr < 1.9, "DEADLINE_SOON came #{(now - tr).round(2)} s after the reserve, want ~1 s")
    # and a reserve sent in that last second gets it at once
    t = now
    raises(Beaneater::DeadlineSoonError, 'reserve(1) while holding a job in its last second') { bz.tubes.reserve(1) }
    check(now - t < 0.5, "immediate DEADLINE_SOON took #{(now - t).round(2)} s")
    sleep([tr + 2 - now, 0].max)
    # a timed change, which a loaded machine may make a little late: asked until it is made
    sleep 0.02 while job.stats.state == 'reserved' && now < tr + 7
    job_stats(job, { state: 'ready', timeouts: 1 }, 'job after its ttr lapsed')
    same(job.reserved?, true, 'beaneater caches reserved? = true after a lapse') # client-side flag
    job = bz.tubes.reserve(1)
    job_is(job, id, 'ttr', 'reserve after the ttr lapsed')
    job_stats(job, { reserves: 2, timeouts: 1 }, 'reserved again')
    job.delete
    same(bz.stats.job_timeouts, 1, 'stats: job_timeouts')

    # ---------------------------------------------------------------- jobs.register / process!
    tw1, tw2 = tname('w1'), tname('w2')
    worker = connect
    ids = {}
    ids['boom'] = put(bz.tubes[tw2], 'boom', pri: 0)
    ids['a'] = put(bz.tubes[tw1], 'a', pri: 1)
    ids['retry'] = put(bz.tubes[tw1], 'retry', pri: 2)
    ids['b'] = put(bz.tubes[tw1], 'b', pri: 3)
    ids['c'] = put(bz.tubes[tw2], 'c', pri: 4)
    seen = []
    first_try = nil
    problems = []
    handler = lambda do |job|
      seen << job.body
      problems << "job #{job.id} not reserved in the processor" unless job.reserved?
      case job.body
      when 'boom'
        raise 'boom' # StandardError: process! buries the job
      when 'retry'
        if first_try.nil?
          first_try = now
          raise RetryMe # in retry_on: released with release_delay
        end
        problems << "retry job came back #{((first_try + 1.0 - now) * 1000).round} ms early" if now < first_try + 1.0
        problems << "retry job releases #{job.stats.releases}" unless job.stats.releases == 1
      end
      worker.jobs.stop! if seen.size == 6 # a, b, c, boom, retry twice: the loop ends by itself
    end
    worker.jobs.register(tw1, retry_on: [RetryMe], max_retries: 2, &handler)
    worker.jobs.register(tw2, &handler)
    same(worker.jobs.processors.keys.sort, [tw1, tw2].sort, 'jobs.processors')
    worker.jobs.process!(release_delay: 1, reserve_timeout: 1)
    check(problems.empty?, "process!: #{problems.join('; ')}")
    same(seen, %w(boom a retry b c retry), 'process!: order of processing')
    same(worker.jobs.stop?, true, 'jobs.stop?')
    check(worker.jobs.current_job.nil?, 'jobs.current_job after process!')
    same(watched(worker).sort, [tw1, tw2].sort, 'process!: watched tubes')
    %w(a b c retry).each { |n| check(bz.jobs.find(ids[n]).nil?, "process!: job #{n} not deleted") }
    boom = bz.jobs.find(ids['boom'])
    job_is(boom, ids['boom'], 'boom', 'process!: the failed job')
    job_stats(boom, { state: 'buried', buries: 1, tube: tw2 }, 'process!: the failed job')
    tube_stats(bz.tubes[tw1], { total_jobs: 3, cmd_delete: 3, current_jobs_ready: 0 }, 'process!: tube w1')

    # ---------------------------------------------------------------- tube.clear
    tube_c = bz.tubes[tname('clear')]
    idb = put(tube_c, 'c-bury', pri: 0)
    idh = put(tube_c, 'c-hold', pri: 1)
    put(tube_c, 'c-ready', pri: 2)
    put(tube_c, 'c-delayed', delay: 60)
    holder = connect
    holder.tubes.watch!(tube_c.name)
    job = holder.tubes.reserve(1)
    job_is(job, idb, 'c-bury', 'clear: first reserve')
    job.bury
    keep = holder.tubes.reserve(1) # stays reserved: clear leaves it
    job_is(keep, idh, 'c-hold', 'clear: second reserve')
    tube_stats(tube_c, { current_jobs_ready: 1, current_jobs_buried: 1, current_jobs_delayed: 1,
                         current_jobs_reserved: 1 }, 'before clear')
    tube_c.clear
    tube_stats(tube_c, { current_jobs_ready: 0, current_jobs_delayed: 0, current_jobs_buried: 0,
                         current_jobs_reserved: 1, cmd_delete: 3 }, 'after clear')
    same(watched(bz), [tube_c.name], 'clear: watched (watch! then a refused ignore)')
    # a connection closed while it holds a job gives the job back
    holder.close
    deadline = now + 2
    sleep 0.02 until bz.jobs.find(idh).stats.state == 'ready' || now > deadline
    job_stats(bz.jobs.find(idh), { state: 'ready', reserves: 1, releases: 0, timeouts: 0 }, 'job of a closed connection')
    same(bz.jobs.find(idh).delete[:status], 'DELETED', 'delete of the given-back job')

    # ---------------------------------------------------------------- error paths
    used_before = bz.tubes.used.name
    raises(Beaneater::InvalidTubeName, 'use of a bad name') { bz.tubes.use('bad*name') }
    raises(Beaneater::InvalidTubeName, 'use of a name starting with -') { bz.tubes.use('-x') }
    raises(Beaneater::InvalidTubeName, 'use of a 201-byte name') { bz.tubes.use('x' * 201) }
    same(bz.tubes.used.name, used_before, 'tubes.used after refused uses')
    raises(Beaneater::InvalidTubeName, 'watch of a bad name') { bz.tubes.watch('bad*name') }
    same(watched(bz), [tube_c.name], 'watched after a refused watch')
    long = 'y' * 200
    bz.tubes.watch(long)
    same(watched(bz).sort, [tube_c.name, long].sort, 'watch of a 200-byte name')
    bz.tubes.ignore(long)
    e = raises(Beaneater::NotFoundError, 'stats of a missing tube') { bz.tubes[tname('nope')].stats }
    same(e.cmd, "stats-tube #{tname('nope')}", 'stats-tube NotFoundError cmd')
    raises(Beaneater::NotFoundError, 'pause of a missing tube') { bz.tubes[tname('nope')].pause(1) }
    big = bz.tubes[tname('big')]
    e = raises(Beaneater::JobTooBigError, 'put of 65536 bytes') { big.put('z' * 65536) }
    same(e.status, 'JOB_TOO_BIG', 'JobTooBigError status')
    idz = put(big, 'z' * 65535)
    same(bz.jobs.find(idz).body.bytesize, 65535, 'put of 65535 bytes: body size')
    same(bz.jobs.find(idz).delete[:status], 'DELETED', 'delete of the 65535-byte job')
    raises(Beaneater::NotFoundError, 'delete of a missing id') { bz.connection.transmit('delete 999999') }
    raises(Beaneater::NotFoundError, 'release of an unreserved job') { bz.connection.transmit("release #{boom.id} 0 0") }
    raises(Beaneater::NotFoundError, 'bury of an unreserved job') { bz.connection.transmit("bury #{boom.id} 0") }
    raises(Beaneater::UnknownCommandError, 'an unknown command') { bz.connection.transmit('frobnicate') }
    raises(Beaneater::BadFormatError, 'put without its size') { bz.connection.transmit('put 0 0 10') }
    same(bz.connection.transmit('list-tube-used')[:status], 'USING', 'connection usable after the errors')
    crlf = connect
    e = raises(Beaneater::ExpectedCrlfError, 'put whose body is longer than announced') do
      crlf.connection.transmit("put 0 0 10 2\r\nabcd")
    end
    same(e.status, 'EXPECTED_CRLF', 'ExpectedCrlfError status')
    crlf.close
    raises(Beaneater::NotConnected, 'a command on a closed client') { crlf.stats.uptime }

    # ---------------------------------------------------------------- final counters
    fin = bz.stats.send(:data) # one snapshot (Beaneater::Stats#data is protected)
    same(fin.total_jobs, $inserted, 'stats: total_jobs (every put the scenario made)')
    same(fin.current_jobs_buried, 1, 'stats: current_jobs_buried (the failed job)')
    same(fin.current_jobs_ready + fin.current_jobs_reserved + fin.current_jobs_delayed, 0, 'stats: jobs left')
    same(fin.total_connections, $connections, 'stats: total_connections (no hidden reconnect)')
    check(fin.uptime.is_a?(Integer) && fin.uptime >= 5, "stats: uptime #{fin.uptime.inspect}")
    boom.delete

    [bz, other, worker].each(&:close)
  end
rescue Timeout::Error
  fail!('scenario did not finish in 25 s')
rescue SystemExit
  raise
rescue Exception => e
  fail!("unexpected #{e.class}: #{e.message} at #{(e.backtrace || []).first(3).join(' < ')}")
end
puts 'OK'
exit 0
