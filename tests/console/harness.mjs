// tests/console/harness.mjs: what the console's browser tests stand on:
// a fresh PostgreSQL database, a private redis-server the test can stop,
// a reviewd on loopback, headless Chromium, and bounded waits.
//
// Like tests/reviewd (rvt_kit.h), everything is real and private to the
// run: the database "rvt_console_<pid>_<random>" is created on the
// stack's server (DLOCK_TEST_DATABASE_URL) and dropped at the end; the
// redis-server listens on a port the kernel picked, with its pid known,
// so "Redis stopped" is a SIGTERM to that pid; reviewd (REVIEWD_BIN)
// listens on 127.0.0.1:0 with DEV_LOGIN=1 and is found ready by its
// "listening" log line.  Chromium is Debian's (/usr/bin/chromium), driven
// by playwright-core without any browser download.  Every wait has a
// bound and says what it waited for when it gives up.
import {spawn, execFileSync} from 'node:child_process';
import {randomBytes} from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export const JWT_SECRET = 'console-test-secret-0123456789abcdef';
const CHROMIUM = '/usr/bin/chromium';

// Polls check() (sync or async, truthy = done) every 50 ms for up to ms;
// throws "timed out after ms: what" otherwise.
export async function waitFor(what, check, ms = 10000) {
    const deadline = Date.now() + ms;
    let last;
    for (;;) {
        try {
            const v = await check();
            if (v) {
                return v;
            }
        } catch (e) {
            last = e;
        }
        if (Date.now() > deadline) {
            throw new Error(`timed out after ${ms} ms: ${what}`
                            + (last ? ` (last error: ${last.message})` : ''));
        }
        await new Promise((r) => setTimeout(r, 50));
    }
}

function withDatabase(url, name) {
    const u = new URL(url);
    u.pathname = `/${name}`;
    return u.toString();
}

export function createDatabase() {
    const admin = process.env.DLOCK_TEST_DATABASE_URL;
    if (!admin) {
        throw new Error('DLOCK_TEST_DATABASE_URL is not set (run through scripts/test)');
    }
    const name = `rvt_console_${process.pid}_${randomBytes(4).toString('hex')}`;
    psql(admin, `CREATE DATABASE ${name}`);
    return {
        name,
        url: withDatabase(admin, name),
        drop: () => psql(admin, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
    };
}

export function psql(url, sql) {
    return execFileSync('psql', ['-X', '-qAt', '-v', 'ON_ERROR_STOP=1', url, '-c', sql],
                        {encoding: 'utf8', timeout: 30000}).trim();
}

// A free loopback port (the kernel's pick, closed again for the server).
function freePort() {
    return new Promise((resolve, reject) => {
        const s = net.createServer();
        s.once('error', reject);
        s.listen(0, '127.0.0.1', () => {
            const {port} = s.address();
            s.close(() => resolve(port));
        });
    });
}

function exited(child) {
    return child.exitCode !== null || child.signalCode !== null;
}

async function stopChild(child, what, ms = 15000) {
    if (!child || exited(child)) {
        return;
    }
    child.kill('SIGTERM');
    try {
        await waitFor(`${what} (pid ${child.pid}) to exit on SIGTERM`, () => exited(child), ms);
    } catch (e) {
        child.kill('SIGKILL');
        throw e;
    }
}

// A private redis-server on a free port, no persistence.
export async function startRedis(dir) {
    const port = await freePort();
    const child = spawn('redis-server', [
        '--port', String(port), '--bind', '127.0.0.1', '--save', '',
        '--appendonly', 'no', '--dir', dir,
    ], {stdio: ['ignore', fs.openSync(path.join(dir, 'redis.log'), 'a'), 'inherit']});
    await waitFor(`redis-server on port ${port} to accept connections`, () =>
        new Promise((resolve) => {
            const sock = net.connect(port, '127.0.0.1');
            sock.once('connect', () => { sock.destroy(); resolve(true); });
            sock.once('error', () => resolve(false));
        }));
    return {
        url: `redis://127.0.0.1:${port}/0`,
        pid: child.pid,
        stop: () => stopChild(child, 'redis-server'),
    };
}

// reviewd on 127.0.0.1:0 with DEV_LOGIN=1; resolves when it listens.
export async function startReviewd(dir, databaseUrl, redisUrl) {
    const bin = process.env.REVIEWD_BIN;
    if (!bin) {
        throw new Error('REVIEWD_BIN is not set (run through ctest)');
    }
    const log = path.join(dir, 'reviewd.log');
    const env = {
        PATH: process.env.PATH,
        HOME: process.env.HOME || os.homedir(),
        DATABASE_URL: databaseUrl,
        JWT_SECRET,
        LISTEN_ADDR: '127.0.0.1:0',
        REDIS_URL: redisUrl,
        DEV_LOGIN: '1',
        REVIEWD_THREADS: '4',
        REVIEWD_REDIS_CHECK_MS: '200',
        REVIEWD_REDIS_TIMEOUT_MS: '500',
        REVIEWD_LOG_FILE: log,
    };
    const child = spawn(bin, ['serve'], {env, stdio: ['ignore', 'inherit', 'inherit']});
    const port = await waitFor('reviewd to log "listening"', () => {
        if (exited(child)) {
            throw new Error(`reviewd exited (${child.exitCode ?? child.signalCode}): `
                            + tail(log));
        }
        const line = readIf(log).split('\n').find((l) => l.includes('"msg":"listening"'));
        return line ? JSON.parse(line).port : null;
    }, 30000);
    return {
        base: `http://127.0.0.1:${port}`,
        log,
        stop: async () => {
            await stopChild(child, 'reviewd');
            if (child.exitCode !== 0) {
                throw new Error(`reviewd exited ${child.exitCode ?? child.signalCode} `
                                + `on SIGTERM: ${tail(log)}`);
            }
        },
    };
}

function readIf(file) {
    try {
        return fs.readFileSync(file, 'utf8');
    } catch (e) {
        return '';
    }
}

export function tail(file, lines = 20) {
    return readIf(file).trimEnd().split('\n').slice(-lines).join('\n');
}

// Headless Chromium.  Playwright gives each launch a fresh temporary
// profile (its own --user-data-dir, removed on close; it refuses the
// flag in args), and each browser context is a separate session.
export async function launchChromium() {
    let chromium;
    try {
        ({chromium} = await import('playwright-core'));
    } catch (e) {
        throw new Error(`playwright-core is not installed (scripts/deps runs `
                        + `tests/console/install.sh): ${e.message}`);
    }
    return chromium.launch({
        executablePath: CHROMIUM,
        headless: true,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
               '--no-first-run', '--disable-background-networking',
               '--disable-component-update', '--disable-sync'],
        timeout: 30000,
    });
}

// The API as a client outside the browser (setup only): dev tokens and
// JSON calls.
export class ApiClient {
    constructor(base) {
        this.base = base;
    }

    async token(sub, role) {
        const res = await this.call('POST', '/v1/dev/token', null, {sub, role});
        return res.token;
    }

    async call(method, p, token, body) {
        const headers = {};
        if (token) {
            headers.Authorization = `Bearer ${token}`;
        }
        if (body !== undefined) {
            headers['Content-Type'] = 'application/json';
        }
        const res = await fetch(this.base + p, {
            method, headers, body: body === undefined ? undefined : JSON.stringify(body),
        });
        const data = await res.json();
        if (!res.ok) {
            throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(data)}`);
        }
        return data;
    }

    // Creates and submits a document as author; returns {doc, review}.
    async pending(authorToken, title, content) {
        const doc = await this.call('POST', '/v1/documents', authorToken, {title, content});
        return this.call('POST', `/v1/documents/${doc.id}/submit`, authorToken, {});
    }
}
