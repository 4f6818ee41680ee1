<?php

declare(strict_types=1);

require dirname(__DIR__) . '/vendor/autoload.php';

// `composer dump-autoload` without an installed vendor/ (no composer.lock)
// writes the production autoloader only, so the autoload-dev mapping of
// composer.json may be missing: map Delayer\Tests\ here as well.
spl_autoload_register(static function (string $class): void {
    $prefix = 'Delayer\\Tests\\';
    if (str_starts_with($class, $prefix)) {
        $file = __DIR__ . '/' . str_replace('\\', '/', substr($class, \strlen($prefix))) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});

use Delayer\Tests\RedisServer;

if (!extension_loaded('redis')) {
    fwrite(STDERR, "The tests need the redis extension (phpredis).\n");
    exit(1);
}

// One real redis-server for the whole run; stopped when PHPUnit exits.
register_shutdown_function([RedisServer::class, 'stopAll']);
RedisServer::shared();
