<?php
// What the PHP scenarios share: fail(), check() and same(), the PORT argument ($port), a bound on
// the whole run, and PHP errors and uncaught exceptions turned into a FAIL. Usage: require_once it first.

declare(strict_types=1);

function fail(string $why): never
{
    fwrite(STDERR, "FAIL: $why\n");
    exit(1);
}

function check(bool $ok, string $why): void
{
    if (!$ok) {
        fail($why);
    }
}

function same($got, $want, string $what): void
{
    if ($got !== $want) {
        fail("$what: got " . var_export($got, true) . ', want ' . var_export($want, true));
    }
}

if ($argc !== 2 || !ctype_digit($argv[1])) {
    fwrite(STDERR, "usage: php scenario.php PORT\n");
    exit(2);
}
$port = (int) $argv[1];

// The whole run is bounded: a blocking read is interrupted (no SA_RESTART) and the handler fails.
pcntl_async_signals(true);
pcntl_signal(SIGALRM, function () {
    fail('scenario did not finish in 25 s');
}, false);
pcntl_alarm(25);
set_error_handler(function (int $no, string $msg, string $file, int $line) {
    if (!(error_reporting() & $no)) {
        return false;  // silenced with @ (the client does so for its socket calls)
    }
    fail("PHP error $msg at $file:$line");
});
set_exception_handler(function (\Throwable $e) {
    fail('unexpected ' . get_class($e) . ': ' . $e->getMessage() . ' at ' . $e->getFile() . ':' . $e->getLine());
});
