// console/status.js: the status strip: what reviewd says about its
// dependencies, from GET /readyz (PostgreSQL, Redis, broker, content
// store) and GET /metrics (the outbox backlog), every few seconds.
//
// Redis reads "ok" or "degraded": without Redis reviewd still decides
// reviews (PostgreSQL alone serialises them), only without lock fences,
// and the strip says so instead of alarming.  A probe that fails leaves
// the strip saying reviewd is unreachable, never a stale "ok".
import {h, replace} from './dom.js';

const POLL_MS = 3000;

export function startStatusStrip(list) {
    let timer = null;
    let inflight = null;

    async function refresh() {
        if (inflight) {
            return inflight;
        }
        inflight = probe().then((items) => {
            replace(list, ...items.map(([dep, label, value, good]) =>
                h('li', {'data-dep': dep, class: good ? 'dep-ok' : 'dep-bad'},
                  h('span', {class: 'dep-name'}, `${label}: `),
                  h('strong', {}, value))));
        }).finally(() => {
            inflight = null;
        });
        return inflight;
    }

    function schedule() {
        clearTimeout(timer);
        timer = setTimeout(() => refresh().finally(schedule), POLL_MS);
    }

    refresh().finally(schedule);
    return {refresh};
}

// [dep, label, value, good] for each item of the strip.
async function probe() {
    let ready;
    try {
        const res = await fetch('/readyz', {cache: 'no-store'});
        ready = await res.json();
    } catch (e) {
        return [['service', 'reviewd', 'unreachable', false]];
    }
    const backlog = await outboxBacklog();
    return [
        ['service', 'Service', ready.status, ready.status === 'ok'],
        ['postgres', 'PostgreSQL', ready.postgres, ready.postgres === 'ok'],
        ['redis', 'Redis', redisWords(ready.redis), ready.redis === 'ok'],
        ['amqp', 'Broker', brokerWords(ready.amqp), ready.amqp !== 'down'],
        ['outbox', 'Outbox backlog', backlog === null ? 'unknown' : String(backlog),
         backlog !== null && backlog < 100],
    ];
}

function redisWords(state) {
    if (state === 'ok') {
        return 'ok';
    }
    return state === 'off' ? 'degraded (not configured)'
                           : 'degraded (down: decisions have no fence)';
}

function brokerWords(state) {
    if (state === 'off') {
        return 'off (events stay in the outbox)';
    }
    return state;
}

// reviewd_outbox_backlog from the Prometheus text, or null.
async function outboxBacklog() {
    try {
        const res = await fetch('/metrics', {cache: 'no-store'});
        const text = await res.text();
        const m = text.match(/^reviewd_outbox_backlog (-?\d+)$/m);
        const n = m ? Number(m[1]) : -1;
        return n >= 0 ? n : null;
    } catch (e) {
        return null;
    }
}
