<?php
// Every method of Pheanstalk 4 (Debian's php-pda-pheanstalk, unmodified) against a beanstalkd
// protocol server: tubes (use, watch, ignore, watchOnly, the three lists), put with priority,
// delay and TTR, the four peeks, reserve, reserveWithTimeout (0 with nothing ready gives null),
// bury, kick, kickJob, release with a delay, touch, delete, pauseTube/resumeTube, the three stats
// with their documented keys and value shapes, DEADLINE_SOON, a TTR lapse, and the client's
// exception for each error reply. Pheanstalk 4.0.4 has no reserveJob(): reserve-job is sent as a
// small CommandInterface through the client's own Connection class.
// A job put (or released) with a delay of 1 s must not be handed out before that second is over.
// Usage: php scenario.php PORT   (exits 0 on success; prints "FAIL: why" and exits 1 on the first
// failure; gives up with a FAIL after 25 s)

declare(strict_types=1);

require_once '/usr/share/php/Pheanstalk/autoload.php';
require_once __DIR__ . '/../scenario-common.php';

use Pheanstalk\Command\AbstractCommand;
use Pheanstalk\Connection;
use Pheanstalk\Contract\ResponseParserInterface;
use Pheanstalk\Exception;
use Pheanstalk\Job;
use Pheanstalk\JobId;
use Pheanstalk\Pheanstalk;
use Pheanstalk\Response\ArrayResponse;
use Pheanstalk\SocketFactory;

/** reserve-job <id>: Pheanstalk 4.0.4 has no method for it; its parser mirrors ReserveCommand's. */
final class ReserveJobCommand extends AbstractCommand implements ResponseParserInterface
{
    private $id;

    public function __construct(int $id)
    {
        $this->id = $id;
    }

    public function getCommandLine(): string
    {
        return 'reserve-job ' . $this->id;
    }

    public function parseResponse(string $responseLine, ?string $responseData): ArrayResponse
    {
        if ($responseLine === 'NOT_FOUND') {
            throw new Exception\JobNotFoundException('NOT_FOUND: job ' . $this->id);
        }
        if (!preg_match('#^RESERVED (\d+) \d+$#', $responseLine, $m)) {
            throw new Exception\ServerException('Unhandled response: ' . $responseLine);
        }
        return $this->createResponse('RESERVED', ['id' => (int) $m[1], 'jobdata' => $responseData]);
    }
}

/** Runs $fn, which must throw $class (or a subclass); returns the exception's message. */
function throws(string $class, callable $fn, string $what): string
{
    try {
        $fn();
    } catch (\Throwable $e) {
        if ($e instanceof $class) {
            return $e->getMessage();
        }
        fail("$what: threw " . get_class($e) . ' (' . $e->getMessage() . "), want $class");
    }
    fail("$what: threw nothing, want $class");
}

function jobIs(?Job $job, int $id, string $data, string $what): void
{
    check($job !== null, "$what: no job, want job $id");
    same($job->getId(), $id, "$what: id");
    same($job->getData(), $data, "$what: body of job $id");
}

/** Pheanstalk returns every YAML value as a string: "numbers as numbers" means decimal digits. */
function checkDict(\ArrayAccess $r, array $numeric, array $strings, string $what): void
{
    foreach ($numeric as $key) {
        check(isset($r[$key]), "$what: key $key missing");
        check(is_string($r[$key]) && preg_match('/^\d+$/', $r[$key]) === 1, "$what: $key is " . var_export($r[$key], true) . ', not a number');
    }
    foreach ($strings as $key) {
        check(isset($r[$key]), "$what: key $key missing");
        check(is_string($r[$key]) && $r[$key] !== '', "$what: $key is empty");
    }
    $known = array_merge($numeric, $strings);
    foreach ($r as $key => $value) {
        check(in_array($key, $known, true), "$what: unexpected key $key: $value");
    }
}

const JOB_KEYS_NUM = ['id', 'pri', 'age', 'delay', 'ttr', 'time-left', 'file', 'reserves', 'timeouts', 'releases', 'buries', 'kicks'];
const JOB_KEYS_STR = ['tube', 'state'];
const TUBE_KEYS_NUM = ['current-jobs-urgent', 'current-jobs-ready', 'current-jobs-reserved', 'current-jobs-delayed',
    'current-jobs-buried', 'total-jobs', 'current-using', 'current-watching', 'current-waiting', 'cmd-delete',
    'cmd-pause-tube', 'pause', 'pause-time-left'];
const STATS_KEYS_NUM = ['current-jobs-urgent', 'current-jobs-ready', 'current-jobs-reserved', 'current-jobs-delayed',
    'current-jobs-buried', 'cmd-put', 'cmd-peek', 'cmd-peek-ready', 'cmd-peek-delayed', 'cmd-peek-buried',
    'cmd-reserve', 'cmd-reserve-with-timeout', 'cmd-delete', 'cmd-release', 'cmd-use', 'cmd-watch', 'cmd-ignore',
    'cmd-bury', 'cmd-kick', 'cmd-touch', 'cmd-stats', 'cmd-stats-job', 'cmd-stats-tube', 'cmd-list-tubes',
    'cmd-list-tube-used', 'cmd-list-tubes-watched', 'cmd-pause-tube', 'job-timeouts', 'total-jobs', 'max-job-size',
    'current-tubes', 'current-connections', 'current-producers', 'current-workers', 'current-waiting',
    'total-connections', 'pid', 'uptime', 'binlog-oldest-index', 'binlog-current-index',
    'binlog-records-migrated', 'binlog-records-written', 'binlog-max-size'];
const STATS_KEYS_STR = ['version', 'rusage-utime', 'rusage-stime', 'draining', 'id', 'hostname', 'os', 'platform'];

function jobStats(Pheanstalk $c, int $id, array $want, string $what): ArrayResponse
{
    $s = $c->statsJob(new JobId($id));
    checkDict($s, JOB_KEYS_NUM, JOB_KEYS_STR, "$what: stats-job $id");
    same($s['id'], (string) $id, "$what: stats-job $id id");
    foreach ($want as $key => $value) {
        same($s[$key], (string) $value, "$what: stats-job $id $key");
    }
    return $s;
}

// Waits (up to 5 s) until stats-job says the job is no longer in `state`: a timed change, which
// a loaded machine may make a little late.
function waitWhileState(Pheanstalk $c, int $id, string $state): void
{
    $end = microtime(true) + 5;
    while ($c->statsJob(new JobId($id))['state'] === $state && microtime(true) < $end) {
        usleep(20000);
    }
}

function tubeStats(Pheanstalk $c, string $tube, array $want, string $what): ArrayResponse
{
    $s = $c->statsTube($tube);
    checkDict($s, TUBE_KEYS_NUM, ['name'], "$what: stats-tube $tube");
    same($s['name'], $tube, "$what: stats-tube name");
    foreach ($want as $key => $value) {
        same($s[$key], (string) $value, "$what: stats-tube $tube $key");
    }
    return $s;
}

/** reserveWithTimeout(0) must come back at once with null. */
function nothingReady(Pheanstalk $c, string $what): void
{
    $t = microtime(true);
    $job = $c->reserveWithTimeout(0);
    check($job === null, "$what: reserveWithTimeout(0) gave job " . ($job ? $job->getId() : '') . ', want null');
    check(microtime(true) - $t < 0.9, "$what: reserveWithTimeout(0) took " . round(microtime(true) - $t, 3) . ' s');
}

/**
 * Polls reserveWithTimeout(0) until job $id comes, failing if it comes before $notBefore (a
 * moment no later than the server's due time) or after $notBefore + 2.5 s.
 */
function pollUntilDue(Pheanstalk $c, int $id, string $data, float $notBefore, string $what): Job
{
    for (;;) {
        $job = $c->reserveWithTimeout(0);
        $now = microtime(true);
        if ($job !== null) {
            jobIs($job, $id, $data, $what);
            check($now >= $notBefore, "$what: job $id reserved " . round(($notBefore - $now) * 1000) . ' ms early');
            return $job;
        }
        check($now < $notBefore + 2.5, "$what: job $id not ready 2.5 s after its due time");
        usleep(20000);
    }
}

// ---------------------------------------------------------------------------------------------
$producer = Pheanstalk::create('127.0.0.1', $port);
$worker = Pheanstalk::create('127.0.0.1', $port);
$otherConnection = new Connection(new SocketFactory('127.0.0.1', $port, 5));
$other = new Pheanstalk($otherConnection);  // a third connection, for reserve-job
$reserveJob = function (int $id) use ($otherConnection): Job {
    $r = $otherConnection->dispatchCommand(new ReserveJobCommand($id));
    return new Job($r['id'], $r['jobdata']);
};

// --- Tubes ------------------------------------------------------------------------------------
same($producer->listTubeUsed(true), 'default', 'list-tube-used on a new connection');
same($producer->listTubesWatched(true), ['default'], 'list-tubes-watched on a new connection');
same($producer->listTubes(), ['default'], 'list-tubes on a new server');
$tube = 'ph.jobs';
same($producer->useTube($tube), $producer, 'useTube returns the client');
same($producer->listTubeUsed(true), $tube, 'list-tube-used after use');
same($producer->listTubeUsed(), $tube, 'listTubeUsed (cached) after use');
same($worker->watch($tube), $worker, 'watch returns the client');
same($worker->listTubesWatched(true), ['default', $tube], 'list-tubes-watched after watch');
same($worker->ignore('default'), $worker, 'ignore returns the client');
same($worker->listTubesWatched(true), [$tube], 'list-tubes-watched after ignore default');
$worker->watchOnly('ph.other');
same($worker->listTubesWatched(true), ['ph.other'], 'list-tubes-watched after watchOnly(ph.other)');
$worker->watchOnly($tube);
same($worker->listTubesWatched(true), [$tube], 'list-tubes-watched after watchOnly(ph.jobs)');
// ph.other is watched by nobody now and holds no job: it is gone.
same($producer->listTubes(), ['default', $tube], 'list-tubes after ph.other is left');
throws(Exception\ServerException::class, function () use ($worker, $tube) {
    $worker->ignore($tube);
}, 'ignore of the only watched tube (NOT_IGNORED)');
same($worker->listTubesWatched(true), [$tube], 'list-tubes-watched after NOT_IGNORED');
$other->useTube($tube);

// --- put, peek, reserve, priorities -----------------------------------------------------------
$alpha = $producer->put('alpha', 100, 0, 30)->getId();
$bravo = $producer->put('bravo', 50, 0, 30)->getId();
check($alpha >= 1 && $bravo === $alpha + 1, "ids $alpha, $bravo: want consecutive ids from 1");
jobStats($producer, $alpha, ['tube' => $tube, 'state' => 'ready', 'pri' => 100, 'delay' => 0, 'ttr' => 30,
    'time-left' => 0, 'reserves' => 0, 'timeouts' => 0, 'releases' => 0, 'buries' => 0, 'kicks' => 0], 'after put');
tubeStats($producer, $tube, ['current-jobs-urgent' => 2, 'current-jobs-ready' => 2, 'current-jobs-reserved' => 0,
    'current-jobs-delayed' => 0, 'current-jobs-buried' => 0, 'total-jobs' => 2, 'current-using' => 2,
    'current-watching' => 1, 'current-waiting' => 0, 'pause' => 0, 'pause-time-left' => 0], 'after two puts');
jobIs($producer->peekReady(), $bravo, 'bravo', 'peekReady: the smaller priority first');
jobIs($producer->peek(new JobId($alpha)), $alpha, 'alpha', 'peek(alpha)');
check($producer->peekDelayed() === null, 'peekDelayed with no delayed job: want null');
check($producer->peekBuried() === null, 'peekBuried with no buried job: want null');
jobIs($worker->reserve(), $bravo, 'bravo', 'reserve: the smaller priority first');
jobIs($worker->reserveWithTimeout(0), $alpha, 'alpha', 'reserveWithTimeout(0) with a ready job');
nothingReady($worker, 'all reserved');
$s = jobStats($producer, $bravo, ['state' => 'reserved', 'reserves' => 1, 'ttr' => 30], 'after reserve');
check((int) $s['time-left'] >= 28 && (int) $s['time-left'] <= 30, 'time-left of a fresh reservation with TTR 30: ' . $s['time-left']);
tubeStats($producer, $tube, ['current-jobs-ready' => 0, 'current-jobs-reserved' => 2], 'after two reserves');
$worker->touch(new JobId($bravo));
$worker->delete(new JobId($bravo));
throws(Exception\JobNotFoundException::class, function () use ($producer, $bravo) {
    $producer->peek(new JobId($bravo));
}, 'peek of a deleted job');
throws(Exception\JobNotFoundException::class, function () use ($worker, $bravo) {
    $worker->delete(new JobId($bravo));
}, 'delete of a deleted job');
throws(Exception\JobNotFoundException::class, function () use ($producer, $alpha) {
    $producer->delete(new JobId($alpha));
}, "delete of a job reserved by another connection");

// --- bury, kick, kickJob, reserve-job -------------------------------------------------------
$worker->bury(new JobId($alpha), 7);
jobStats($producer, $alpha, ['state' => 'buried', 'pri' => 7, 'buries' => 1], 'after bury');
jobIs($producer->peekBuried(), $alpha, 'alpha', 'peekBuried');
check($producer->peekReady() === null, 'peekReady with only a buried job: want null');
foreach (['bury' => function () use ($worker, $alpha) { $worker->bury(new JobId($alpha), 1); },
          'touch' => function () use ($worker, $alpha) { $worker->touch(new JobId($alpha)); },
          'release' => function () use ($worker, $alpha) { $worker->release(new JobId($alpha), 1, 0); }] as $verb => $fn) {
    throws(Exception\JobNotFoundException::class, $fn, "$verb of a buried job");
}
same($producer->kick(10), 1, 'kick(10) with one buried job');
jobStats($producer, $alpha, ['state' => 'ready', 'kicks' => 1], 'after kick');
same($producer->kick(10), 0, 'kick(10) with nothing to kick');
jobIs($worker->reserve(), $alpha, 'alpha', 'reserve after kick');
$worker->bury(new JobId($alpha), 8);
$producer->kickJob(new JobId($alpha));
jobStats($producer, $alpha, ['state' => 'ready', 'kicks' => 2, 'buries' => 2, 'pri' => 8], 'after kickJob');
throws(Exception\JobNotFoundException::class, function () use ($producer, $alpha) {
    $producer->kickJob(new JobId($alpha));
}, 'kickJob of a ready job');
jobIs($reserveJob($alpha), $alpha, 'alpha', 'reserve-job of a ready job');
jobStats($producer, $alpha, ['state' => 'reserved', 'reserves' => 3], 'after reserve-job');
throws(Exception\JobNotFoundException::class, function () use ($reserveJob, $alpha) {
    $reserveJob($alpha);
}, 'reserve-job of a reserved job');
throws(Exception\JobNotFoundException::class, function () use ($worker, $alpha) {
    $worker->release(new JobId($alpha), 1, 0);
}, 'release of a job another connection reserved');
$other->delete(new JobId($alpha));

// --- delays: put with delay 1, release with delay 1, kick and kickJob of delayed jobs -----------
$before = microtime(true);
$late = $producer->put('late', 10, 1, 30)->getId();
jobStats($producer, $late, ['state' => 'delayed', 'delay' => 1], 'after put with delay 1');
jobIs($producer->peekDelayed(), $late, 'late', 'peekDelayed');
check($producer->peekReady() === null, 'peekReady with only a delayed job: want null');
tubeStats($producer, $tube, ['current-jobs-delayed' => 1, 'current-jobs-ready' => 0], 'with a delayed job');
nothingReady($worker, 'a job delayed by 1 s, at once');
$job = pollUntilDue($worker, $late, 'late', $before + 1.0, 'put with delay 1');
$before = microtime(true);
$worker->release($job, 20, 1);
jobStats($producer, $late, ['state' => 'delayed', 'pri' => 20, 'delay' => 1, 'releases' => 1], 'after release with delay 1');
nothingReady($worker, 'a job released with delay 1, at once');
// This time a waiting reserve must be woken when the job comes due.
$job = $worker->reserveWithTimeout(5);
$now = microtime(true);
jobIs($job, $late, 'late', 'reserveWithTimeout(5) on a job released with delay 1');
check($now >= $before + 1.0, 'job released with delay 1 reserved ' . round(($before + 1.0 - $now) * 1000) . ' ms early');
check($now < $before + 3.5, 'job released with delay 1 reserved only after ' . round($now - $before, 3) . ' s');
$worker->delete($job);

$kd = $producer->put('kick-delayed', 10, 60, 30)->getId();
same($producer->kick(5), 1, 'kick(5) with one delayed job and no buried job');
jobStats($producer, $kd, ['state' => 'ready', 'kicks' => 1, 'delay' => 60], 'after kick of a delayed job');
$kj = $producer->put('kickjob-delayed', 5, 60, 30)->getId();
$producer->kickJob(new JobId($kj));
jobStats($producer, $kj, ['state' => 'ready', 'kicks' => 1], 'after kickJob of a delayed job');
jobIs($worker->reserveWithTimeout(0), $kj, 'kickjob-delayed', 'reserve of a kicked delayed job');
jobIs($worker->reserveWithTimeout(0), $kd, 'kick-delayed', 'reserve of a kicked delayed job');
$worker->delete(new JobId($kj));
$worker->delete(new JobId($kd));

// --- orders: equal priorities, peek-delayed, peek-buried, kick of buried before delayed ---------
$first = $producer->put('first', 30, 0, 30)->getId();
usleep(2000);  // over Redis, ages count in milliseconds (docs/redis-mode.md)
$second = $producer->put('second', 30, 0, 30)->getId();
$d60 = $producer->put('d60', 30, 60, 30)->getId();
$d30 = $producer->put('d30', 30, 30, 30)->getId();
jobIs($producer->peekDelayed(), $d30, 'd30', 'peekDelayed: the job due soonest');
jobIs($producer->peekReady(), $first, 'first', 'peekReady: equal priorities, the oldest first');
jobIs($worker->reserve(), $first, 'first', 'reserve: equal priorities, the oldest first');
jobIs($worker->reserve(), $second, 'second', 'reserve: equal priorities, then the next');
$worker->bury(new JobId($second), 1);
$worker->bury(new JobId($first), 1);
// Buried jobs come out in the order they were buried; over Redis (DELAYQ_REDIS_MODE=1), lowest
// id first, and ids follow the order of puts only within a shard (docs/redis-mode.md).
$body = [$first => 'first', $second => 'second'];
[$out, $stays] = getenv('DELAYQ_REDIS_MODE') === '1'
    ? [min($first, $second), max($first, $second)] : [$second, $first];
jobIs($producer->peekBuried(), $out, $body[$out], 'peekBuried: the first buried');
same($producer->kick(1), 1, 'kick(1) with two buried and two delayed jobs');
jobStats($producer, $out, ['state' => 'ready'], 'kick(1): the first buried job');
jobStats($producer, $stays, ['state' => 'buried'], 'kick(1): the second buried job stays');
same($producer->kick(10), 1, 'kick(10) with one buried and two delayed jobs: only the buried');
tubeStats($producer, $tube, ['current-jobs-delayed' => 2, 'current-jobs-buried' => 0, 'current-jobs-ready' => 2], 'after kicking the buried jobs');
same($producer->kick(1), 1, 'kick(1) with two delayed jobs');
jobStats($producer, $d30, ['state' => 'ready'], 'kick(1) of delayed jobs: the one due soonest');
jobStats($producer, $d60, ['state' => 'delayed'], 'kick(1) of delayed jobs: the later one stays');
foreach ([$first, $second, $d60, $d30] as $id) {
    $producer->delete(new JobId($id));
}

// --- a waiting reserve is woken by another connection's put -------------------------------------
$child = pcntl_fork();
if ($child === 0) {
    usleep(300000);
    $late = Pheanstalk::create('127.0.0.1', $port);
    $late->useTube($tube)->put('woken', 10, 0, 30);
    exit(0);
}
check($child > 0, 'pcntl_fork failed');
$t = microtime(true);
$job = $worker->reserve();
$waited = microtime(true) - $t;
same($job->getData(), 'woken', 'reserve woken by a put of another connection');
check($waited >= 0.2 && $waited < 3, 'reserve woken by a put 0.3 s later returned after ' . round($waited, 3) . ' s');
pcntl_waitpid($child, $status);
check(pcntl_wifexited($status) && pcntl_wexitstatus($status) === 0, 'the putting child process failed');
$worker->delete($job);

// --- TTR: DEADLINE_SOON, a lapse, touch --------------------------------------------------------
$short = $producer->put('short', 10, 0, 1)->getId();
jobIs($worker->reserve(), $short, 'short', 'reserve of a job with TTR 1');
throws(Exception\DeadlineSoonException::class, function () use ($worker) {
    $worker->reserveWithTimeout(2);
}, 'reserveWithTimeout(2) holding a job in its last second');
throws(Exception\DeadlineSoonException::class, function () use ($worker) {
    $worker->reserve();
}, 'reserve holding a job in its last second');
usleep(1000000);
waitWhileState($producer, $short, 'reserved');
jobStats($producer, $short, ['state' => 'ready', 'reserves' => 1, 'timeouts' => 1], 'after a TTR of 1 s lapsed');
throws(Exception\JobNotFoundException::class, function () use ($worker, $short) {
    $worker->touch(new JobId($short));
}, 'touch of a job whose TTR lapsed');
$producer->delete(new JobId($short));

$two = $producer->put('two', 10, 0, 2)->getId();
jobIs($worker->reserve(), $two, 'two', 'reserve of a job with TTR 2');
$t = microtime(true);
throws(Exception\DeadlineSoonException::class, function () use ($worker) {
    $worker->reserveWithTimeout(5);
}, 'reserveWithTimeout(5) holding a job with TTR 2');
$waited = microtime(true) - $t;
check($waited >= 0.8 && $waited < 2.0, 'DEADLINE_SOON for a TTR of 2 came after ' . round($waited, 3) . ' s, want about 1 s');
$worker->delete(new JobId($two));

$zero = $producer->put('ttr-zero', 10, 0, 0)->getId();
jobStats($producer, $zero, ['ttr' => 1], 'put with TTR 0 (raised to 1)');
$producer->delete(new JobId($zero));

$held = $producer->put('held', 10, 0, 3)->getId();
jobIs($worker->reserve(), $held, 'held', 'reserve of a job with TTR 3');
usleep(1100000);
$left1 = (int) jobStats($producer, $held, ['state' => 'reserved'], 'TTR 3 after 1.1 s')['time-left'];
$worker->touch(new JobId($held));
$left2 = (int) jobStats($producer, $held, ['state' => 'reserved'], 'after touch')['time-left'];
check($left1 <= 1 && $left2 === 2, "time-left before touch $left1 (want <= 1), after touch $left2 (want 2)");
$worker->release(new JobId($held), 10, 0);
jobStats($producer, $held, ['state' => 'ready', 'releases' => 1], 'after release with delay 0');
$producer->delete(new JobId($held));

// --- pauseTube, resumeTube ---------------------------------------------------------------------
$paused = $producer->put('paused', 10, 0, 30)->getId();
$before = microtime(true);
$producer->pauseTube($tube, 1);
tubeStats($producer, $tube, ['pause' => 1, 'cmd-pause-tube' => 1, 'current-jobs-ready' => 1], 'after pauseTube 1');
nothingReady($worker, 'a paused tube');
jobIs($producer->peekReady(), $paused, 'paused', 'peekReady of a paused tube');
$job = $worker->reserveWithTimeout(5);
$now = microtime(true);
jobIs($job, $paused, 'paused', 'reserveWithTimeout(5) while the tube is paused for 1 s');
check($now >= $before + 1.0, 'job of a tube paused for 1 s reserved ' . round(($before + 1.0 - $now) * 1000) . ' ms early');
$worker->release($job, 10, 0);
$producer->pauseTube($tube, 60);
$s = tubeStats($producer, $tube, ['pause' => 60, 'cmd-pause-tube' => 2], 'after pauseTube 60');
check((int) $s['pause-time-left'] >= 58 && (int) $s['pause-time-left'] <= 60, 'pause-time-left of a fresh 60 s pause: ' . $s['pause-time-left']);
nothingReady($worker, 'a tube paused for 60 s');
$producer->resumeTube($tube);
tubeStats($producer, $tube, ['pause-time-left' => 0, 'cmd-pause-tube' => 3], 'after resumeTube');
$t = microtime(true);
jobIs($worker->reserveWithTimeout(2), $paused, 'paused', 'reserveWithTimeout(2) after resumeTube');
check(microtime(true) - $t < 0.5, 'reserve after resumeTube took ' . round(microtime(true) - $t, 3) . ' s');
$worker->delete(new JobId($paused));
throws(Exception\ServerException::class, function () use ($producer) {
    $producer->pauseTube('ph.no-such-tube', 1);
}, 'pauseTube of a missing tube');

// --- bodies ------------------------------------------------------------------------------------
$bodies = ['', "\r\n", "a\0b\r\nc", str_repeat("\xff\x00\r\n", 1000), str_repeat('x', 65535)];
foreach ($bodies as $i => $body) {
    $id = $producer->put($body)->getId();
    jobIs($producer->peek(new JobId($id)), $id, $body, "peek of body #$i (" . strlen($body) . ' bytes)');
    jobIs($worker->reserveWithTimeout(0), $id, $body, "reserve of body #$i (" . strlen($body) . ' bytes)');
    $worker->delete(new JobId($id));
}
$top = $producer->put('top', 4294967295, 0, 4294967295)->getId();
jobStats($producer, $top, ['pri' => 4294967295, 'ttr' => 4294967295], 'put with the largest pri and ttr');
$producer->delete(new JobId($top));

// --- stats -------------------------------------------------------------------------------------
$s = $producer->stats();
checkDict($s, STATS_KEYS_NUM, STATS_KEYS_STR, 'stats');
check(preg_match('/^\d+\.\d{6}$/', $s['rusage-utime']) === 1, 'stats rusage-utime ' . $s['rusage-utime']);
check(preg_match('/^\d+\.\d{6}$/', $s['rusage-stime']) === 1, 'stats rusage-stime ' . $s['rusage-stime']);
check(preg_match('/^"1\.12[" ]/', $s['version']) === 1, 'stats version ' . $s['version']);
same($s['draining'], 'false', 'stats draining');
check(preg_match('/^[0-9a-f]{16}$/', $s['id']) === 1, 'stats id ' . $s['id']);
same($s['max-job-size'], '65535', 'stats max-job-size');
same($s['current-connections'], '3', 'stats current-connections');
same($s['current-producers'], '1', 'stats current-producers');
same($s['current-workers'], '2', 'stats current-workers');
same($s['current-tubes'], '2', 'stats current-tubes');
same($s['current-jobs-ready'], '0', 'stats current-jobs-ready');
same($s['job-timeouts'], '1', 'stats job-timeouts');
same($s['total-jobs'], (string) ($top - $alpha + 1), 'stats total-jobs');
same($s['cmd-put'], (string) ($top - $alpha + 1), 'stats cmd-put');
same($s['cmd-pause-tube'], '4', 'stats cmd-pause-tube');
same($s['cmd-kick'], '6', 'stats cmd-kick');
tubeStats($producer, 'default', ['current-using' => 1, 'current-watching' => 2, 'total-jobs' => 0], 'stats-tube default');

// --- error replies -----------------------------------------------------------------------------
throws(Exception\JobNotFoundException::class, function () use ($producer) {
    $producer->peek(new JobId(999999));
}, 'peek of a missing job');
throws(Exception\ServerException::class, function () use ($producer) {
    $producer->statsJob(new JobId(999999));
}, 'statsJob of a missing job');
throws(Exception\ServerException::class, function () use ($producer) {
    $producer->statsTube('ph.no-such-tube');
}, 'statsTube of a missing tube');
foreach (['delete', 'touch', 'kickJob'] as $verb) {
    throws(Exception\JobNotFoundException::class, function () use ($worker, $verb) {
        $worker->$verb(new JobId(999999));
    }, "$verb of a missing job");
}
throws(Exception\JobNotFoundException::class, function () use ($worker) {
    $worker->bury(new JobId(999999), 1);
}, 'bury of a missing job');
throws(Exception\JobNotFoundException::class, function () use ($worker) {
    $worker->release(new JobId(999999), 1, 0);
}, 'release of a missing job');
throws(Exception\JobNotFoundException::class, function () use ($reserveJob) {
    $reserveJob(999999);
}, 'reserve-job of a missing job');
throws(Exception\JobTooBigException::class, function () use ($producer) {
    $producer->put(str_repeat('x', 65536));
}, 'put of 65536 bytes (max-job-size 65535)');
// On a connection of its own: the body of a put refused with BAD_FORMAT is read as a command, so
// this connection gets one reply more than it sent commands (UNKNOWN_COMMAND) and is dropped.
$throwaway = Pheanstalk::create('127.0.0.1', $port);
throws(Exception\ServerBadFormatException::class, function () use ($throwaway) {
    $throwaway->put('x', 4294967296);
}, 'put with priority 2^32');
throws(Exception\ServerUnknownCommandException::class, function () use ($throwaway) {
    $throwaway->listTubeUsed(true);
}, 'the reply after a BAD_FORMAT put (its body, read as a command)');
unset($throwaway);
same($producer->listTubeUsed(true), $tube, 'list-tube-used after a JOB_TOO_BIG put');
$long = str_repeat('t', 201);
foreach (['useTube' => $long, 'watch' => '-dash', 'statsTube' => 'bad name'] as $method => $name) {
    throws(Exception\ServerBadFormatException::class, function () use ($producer, $method, $name) {
        $producer->$method($name);
    }, "$method(" . (strlen($name) > 20 ? strlen($name) . ' bytes' : $name) . ')');
}
throws(Exception\ServerBadFormatException::class, function () use ($producer, $long) {
    $producer->pauseTube($long, 1);
}, 'pauseTube of a 201-byte name');
same($producer->listTubeUsed(true), $tube, 'list-tube-used after a refused use');
same($producer->listTubesWatched(true), ['default'], 'list-tubes-watched after a refused watch');
$max = str_repeat('m', 200);
$producer->useTube($max);
same($producer->listTubeUsed(true), $max, 'use of a 200-byte tube name');
$id = $producer->put('in a long-named tube')->getId();
jobStats($producer, $id, ['tube' => $max], 'a job in a 200-byte tube');
$producer->delete(new JobId($id));
$producer->useTube($tube);

echo "OK\n";
exit(0);
