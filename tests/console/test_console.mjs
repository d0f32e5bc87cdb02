// tests/console/test_console.mjs: the review console in headless
// Chromium against a real reviewd (harness.mjs), as people use it.
//
// Each check is named for the behaviour it shows and runs in order on one
// browser, one context per person (separate sessions).  Every page is
// watched the whole time: an uncaught script error, a dialog (alert from
// injected markup), a Content-Security-Policy violation by the console
// itself, or a 5xx makes the run fail.  axe-core checks each screen for
// serious or critical accessibility violations.  Screenshots go to
// CONSOLE_SCREENSHOTS (the build tree).  Redis is stopped last, by pid,
// for the degraded check.
//
// Usage (ctest does this): node test_console.mjs, with REVIEWD_BIN,
// DLOCK_TEST_DATABASE_URL, CONSOLE_SCREENSHOTS and CONSOLE_WORK_DIR set.
import fs from 'node:fs';
import {createRequire} from 'node:module';
import path from 'node:path';
import {ApiClient, createDatabase, launchChromium, psql, startRedis, startReviewd, tail,
        waitFor} from './harness.mjs';

const require = createRequire(import.meta.url);
const AXE_SOURCE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const SHOTS = process.env.CONSOLE_SCREENSHOTS || path.resolve('console-screenshots');
const WORK = process.env.CONSOLE_WORK_DIR || path.resolve('console-work');
// The bound of any single wait on the page: generous, because a loaded
// machine is slow, not wrong (an idle run takes a fraction of it).
const STEP_MS = 30000;

const XSS_TITLE = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">';
const XSS_CONTENT = '<b>bold?</b><img src=x onerror="window.__xss=3"> plain text';
const XSS_COMMENT = '<img src=x onerror="window.__xss=4">not like this';

let env; // {db, redis, reviewd, api, browser, tokens, problems}

// ---- pages and people ------------------------------------------------------

// Watches a page for what must never happen; problems are reported at the
// end of the check that caused them.
function watch(page, who) {
    page.on('pageerror', (e) => env.problems.push(`${who}: script error: ${e.message}`));
    page.on('dialog', (d) => {
        env.problems.push(`${who}: a dialog opened: ${d.message()}`);
        d.dismiss().catch(() => {});
    });
    page.on('response', (r) => {
        if (r.status() >= 500) {
            env.problems.push(`${who}: ${r.status()} from ${r.url()}`);
        }
    });
    return page.addInitScript(() => {
        window.__csp = [];
        document.addEventListener('securitypolicyviolation', (e) => {
            window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`);
        });
    });
}

// A person signed in through the development sign-in form; check(page)
// runs on the sign-in screen first.
async function person(user, role, viewport = {width: 1000, height: 760},
                      check = async () => {}) {
    const context = await env.browser.newContext({viewport});
    const page = await context.newPage();
    page.setDefaultTimeout(STEP_MS);
    await watch(page, `${user}'s page`);
    await page.goto(`${env.reviewd.base}/`);
    await page.locator('h1').filter({hasText: 'Sign in'}).waitFor();
    await check(page);
    await page.locator('#dev-user').fill(user);
    await page.locator('#dev-role').selectOption(role);
    await page.getByRole('button', {name: 'Sign in as this user'}).click();
    await page.locator('#who-name').filter({hasText: `${user} (${role})`}).waitFor();
    return page;
}

// Opens hash afresh (a goto to the URL the page is on would change
// nothing, so that is a reload) and waits for its heading.
async function go(page, hash, heading) {
    const target = `${env.reviewd.base}/${hash}`;
    if (page.url() === target) {
        await page.reload();
    } else {
        await page.goto(target);
    }
    await page.locator('h1').filter({hasText: heading}).first().waitFor();
}

// The notice's text once it is not empty.
async function noticeText(page) {
    const p = page.locator('#notice p');
    await p.waitFor();
    return (await p.textContent()).trim();
}

async function shot(page, name) {
    await page.screenshot({path: path.join(SHOTS, `${name}.png`), fullPage: true});
}

async function cspViolations(page) {
    return page.evaluate(() => window.__csp.splice(0));
}

// axe-core over the page: no serious or critical violation.
async function accessible(page, label) {
    await page.evaluate(AXE_SOURCE);
    const results = await page.evaluate(() => window.axe.run(document, {
        resultTypes: ['violations'],
    }));
    const bad = results.violations.filter((v) => v.impact === 'serious'
                                                 || v.impact === 'critical');
    for (const v of bad) {
        env.problems.push(`axe on ${label}: ${v.impact} ${v.id}: ${v.help} `
                          + `(${v.nodes.map((n) => n.target.join(' ')).join('; ')})`);
    }
    env.axePages += 1;
}

function expect(cond, what) {
    if (!cond) {
        throw new Error(what);
    }
}

// ---- the checks ------------------------------------------------------------

async function dev_login_signs_known_roles_only() {
    const post = (body) => fetch(`${env.reviewd.base}/v1/dev/token`, {
        method: 'POST', headers: {'Content-Type': 'application/json'},
        body: JSON.stringify(body),
    });
    for (const body of [{sub: 'x', role: 'root'}, {sub: '', role: 'admin'},
                        {sub: 'x'}, {sub: 'x', role: 'admin', exp: 1}]) {
        const res = await post(body);
        const data = await res.json();
        expect(res.status === 400 && data.code === 'INVALID_ARGUMENT',
               `${JSON.stringify(body)} is refused with 400, got ${res.status}`);
    }
    const ok = await (await post({sub: 'zoe', role: 'reviewer'})).json();
    const claims = JSON.parse(Buffer.from(ok.token.split('.')[1], 'base64url'));
    expect(claims.sub === 'zoe' && claims.role === 'reviewer'
           && claims.exp === ok.exp && ok.exp - Date.now() / 1000 > 3500,
           `a one-hour token for zoe as reviewer: ${JSON.stringify(claims)}`);
    await env.api.call('GET', '/v1/reviews?limit=1', ok.token);
}

async function create_submit_approve_as_two_users() {
    const title = 'Quarterly report 数据库';
    const alice = await person('alice', 'author');
    await alice.getByRole('link', {name: 'New document'}).click();
    await alice.locator('h1').filter({hasText: 'New document'}).waitFor();
    await accessible(alice, 'new document');
    await alice.getByLabel('Title').fill(title);
    await alice.getByLabel('Content').fill('本季度的数据库迁移已完成。 Numbers follow.');
    await alice.getByRole('button', {name: 'Create draft'}).click();
    await alice.locator('h1').filter({hasText: title}).waitFor();
    expect((await noticeText(alice)).startsWith('Created draft'), 'a created notice');
    await alice.getByRole('button', {name: 'Submit for review'}).click();
    await alice.locator('.meta .badge').filter({hasText: 'Pending review'}).waitFor();
    await alice.locator('.history').filter({hasText: 'submitted by alice'}).waitFor();
    await shot(alice, 'author-submitted');

    const bob = await person('bob', 'reviewer');
    await bob.locator('h1').filter({hasText: 'Review queue'}).waitFor();
    await bob.getByRole('link', {name: title}).click();
    await bob.locator('h1').filter({hasText: `Review: ${title}`}).waitFor();
    await accessible(bob, 'review');
    await bob.getByLabel('Comment').fill('Looks right.');
    await bob.getByRole('button', {name: 'Approve'}).click();
    const said = await noticeText(bob);
    expect(/^Approved “Quarterly report 数据库” under lock fence \d+\.$/.test(said),
           `bob is told the approval and its fence, got: ${said}`);
    await bob.locator('h1').filter({hasText: 'Review queue'}).waitFor();
    expect(await bob.getByRole('link', {name: title}).count() === 0,
           'the approved review left the queue');
    await shot(bob, 'reviewer-approved');

    await alice.reload();
    const item = alice.locator('.history li').first();
    await item.filter({hasText: 'Approved'}).waitFor();
    const text = await item.textContent();
    expect(/by bob at .*lock fence \d+/.test(text) && text.includes('Looks right.'),
           `alice sees who approved, when, the fence and the comment: ${text}`);
    await shot(alice, 'author-history');
    await accessible(alice, 'document, approved');
    env.approvedTitle = title;
    env.pages = {alice, bob};
}

async function two_reviewers_at_once_get_one_success_and_one_clear_conflict() {
    const {review} = await env.api.pending(env.tokens.dave, 'Contested plan', 'Both want it.');
    const {bob} = env.pages;
    const carol = await person('carol', 'reviewer');
    env.pages.carol = carol;
    await go(bob, `#/reviews/${review.id}`, 'Review: Contested plan');
    await go(carol, `#/reviews/${review.id}`, 'Review: Contested plan');
    await Promise.all([bob.getByRole('button', {name: 'Approve'}).click(),
                       carol.getByRole('button', {name: 'Approve'}).click()]);
    const said = [await noticeText(bob), await noticeText(carol)];
    const won = said.filter((t) => t.startsWith('Approved “Contested plan”'));
    const told = said.filter((t) =>
        /^Someone else is deciding this review right now\./.test(t)
        || /^This review was already approved by (bob|carol) at \d\d:\d\d\.$/.test(t));
    expect(won.length === 1 && told.length === 1,
           `one success and one clear conflict, got: ${JSON.stringify(said)}`);
    for (const page of [bob, carol]) {
        await page.locator('h1').filter({hasText: 'Review queue'}).waitFor();
    }
    const loser = said[0] === won[0] ? carol : bob;
    await shot(loser, 'conflict-told');
    await accessible(loser, 'queue with a conflict notice');
    const decided = await env.api.call('GET', `/v1/reviews/${review.id}`, env.tokens.dave);
    expect(decided.status === 'approved'
           && won[0] && (said[0] === won[0] ? 'bob' : 'carol') === decided.reviewer,
           `the winner is the recorded reviewer: ${JSON.stringify(decided)}`);
}

async function a_double_click_decides_once_and_says_so() {
    const {review} = await env.api.pending(env.tokens.dave, 'Double click', 'Click, click.');
    const {bob} = env.pages;
    await go(bob, `#/reviews/${review.id}`, 'Review: Double click');
    await bob.getByRole('button', {name: 'Approve'}).dblclick();
    const said = await noticeText(bob);
    expect(said.startsWith('Approved “Double click”'), `one approval shown, got: ${said}`);
    await bob.locator('h1').filter({hasText: 'Review queue'}).waitFor();
    const decided = await env.api.call('GET', `/v1/reviews/${review.id}`, env.tokens.dave);
    expect(decided.reviewer === 'bob', 'decided once, by bob');
}

async function markup_in_titles_content_and_comments_shows_as_text() {
    const {review, document: doc} = await env.api.pending(env.tokens.alice, XSS_TITLE,
                                                          XSS_CONTENT);
    const {alice, bob} = env.pages;
    await go(bob, '#/queue', 'Review queue');
    const link = bob.getByRole('link', {name: XSS_TITLE, exact: true});
    expect(await link.textContent() === XSS_TITLE, 'the queue shows the title as text');
    await link.click();
    await bob.locator('h1').filter({hasText: 'Review: <script>'}).waitFor();
    expect(await bob.locator('h1').textContent() === `Review: ${XSS_TITLE}`,
           'the heading is the title, as text');
    expect(await bob.locator('.content').textContent() === XSS_CONTENT,
           'the content is shown as text');
    await shot(bob, 'markup-as-text');
    await bob.getByLabel('Comment').fill(XSS_COMMENT);
    await bob.getByRole('button', {name: 'Reject'}).click();
    const said = await noticeText(bob);
    expect(said.startsWith(`Rejected “${XSS_TITLE}”`), `the rejection, as text: ${said}`);
    await go(alice, `#/documents/${doc.id}`, '<script>');
    const comment = alice.locator('.history .comment').first();
    await comment.waitFor();
    expect(await comment.textContent() === XSS_COMMENT, 'the comment is shown as text');
    for (const page of [alice, bob]) {
        const found = await page.evaluate(() => ({
            xss: window.__xss,
            elements: document.querySelectorAll('main img, main script, main b').length,
        }));
        expect(found.xss === undefined && found.elements === 0,
               `no markup from data became elements or ran: ${JSON.stringify(found)}`);
        const violations = await cspViolations(page);
        expect(violations.length === 0, `the console broke its own CSP: ${violations}`);
    }
    // The policy itself: an inline script added to the page does not run.
    const ran = await alice.evaluate(() => {
        const s = document.createElement('script');
        s.textContent = 'window.__inline = 1';
        document.body.append(s);
        return window.__inline;
    });
    expect(ran === undefined, 'the CSP blocks inline script');
    await waitFor('the CSP to report the blocked inline script', async () =>
        (await alice.evaluate(() => window.__csp.length)) > 0, STEP_MS);
    await cspViolations(alice);
    env.review = review;
}

// Presses Tab until the focused element satisfies test (at most 60).
async function tabTo(page, what, test) {
    for (let i = 0; i < 60; i++) {
        await page.keyboard.press('Tab');
        if (await page.evaluate(test)) {
            return;
        }
    }
    throw new Error(`Tab never reached ${what}`);
}

async function a_reviewer_approves_with_the_keyboard_only() {
    const title = 'Keyboard path';
    await env.api.pending(env.tokens.dave, title, 'Reached by Tab and Enter.');
    const {bob} = env.pages;
    await go(bob, '#/queue', 'Review queue');
    await bob.focus('.skip');
    await bob.keyboard.press('Enter');
    expect(await bob.evaluate(() => document.activeElement.id === 'view'
                                    && location.hash === '#/queue'),
           'the skip link moves focus to the content and leaves the route alone');
    await tabTo(bob, 'the queue link', () => document.activeElement.textContent === 'Keyboard path');
    await bob.keyboard.press('Enter');
    await bob.locator('h1').filter({hasText: `Review: ${title}`}).waitFor();
    await tabTo(bob, 'the comment box', () => document.activeElement.id === 'comment');
    await bob.keyboard.type('Fine by keyboard.');
    await tabTo(bob, 'the Approve button', () => document.activeElement.textContent === 'Approve');
    await shot(bob, 'keyboard-focus-on-approve');
    await bob.keyboard.press('Enter');
    const said = await noticeText(bob);
    expect(said.startsWith(`Approved “${title}”`), `approved by keyboard, got: ${said}`);
}

// No horizontal scroll: the page is no wider than the viewport.
async function fitsWidth(page, label) {
    const w = await page.evaluate(() => ({
        scroll: document.documentElement.scrollWidth,
        inner: window.innerWidth,
    }));
    expect(w.scroll <= w.inner, `${label} scrolls sideways at 375 px: ${JSON.stringify(w)}`);
}

async function a_375_px_phone_needs_no_sideways_scroll() {
    const long = 'Phone-width-check-with-a-very-long-unbroken-title-'.repeat(3);
    const {review} = await env.api.pending(env.tokens.dave, long, 'x'.repeat(300));
    const phone = await person('erin', 'admin', {width: 375, height: 740}, async (page) => {
        await fitsWidth(page, 'sign-in');
        await shot(page, 'phone-sign-in');
        await accessible(page, 'sign-in at 375 px');
    });
    await fitsWidth(phone, 'documents');
    await go(phone, '#/queue', 'Review queue');
    await fitsWidth(phone, 'queue');
    await shot(phone, 'phone-queue');
    await go(phone, `#/reviews/${review.id}`, 'Review:');
    await fitsWidth(phone, 'review');
    const approve = phone.getByRole('button', {name: 'Approve'});
    await approve.scrollIntoViewIfNeeded();
    const box = await approve.boundingBox();
    expect(box && box.x >= 0 && box.x + box.width <= 375,
           `Approve is on screen at 375 px: ${JSON.stringify(box)}`);
    await shot(phone, 'phone-review');
    await approve.click();
    const said = await noticeText(phone);
    expect(said.startsWith('Approved'), `approved on the phone, got: ${said}`);
    await go(phone, '#/search', 'Search');
    await fitsWidth(phone, 'search');
}

async function search_shows_snippets_in_chinese() {
    // The chunk kh-indexer would write for the approved document (the
    // indexer has its own tests; here it is the console that is tested).
    const content = '本季度的数据库迁移已完成。 Numbers follow.';
    psql(env.db.url, `INSERT INTO kh_chunk (document_id, chunk_index, document_version,
        content, byte_offset, tsv, event_id)
        SELECT id, 0, version, '${content}', 0, kh_search_vector(title, '${content}'),
               gen_random_uuid() FROM kh_document WHERE title = '${env.approvedTitle}'`);
    const {alice} = env.pages;
    await go(alice, '#/search', 'Search');
    await alice.getByLabel('Search approved documents').fill('数据');
    await alice.keyboard.press('Enter');
    await alice.locator('h2').filter({hasText: '1 document for “数据”'}).waitFor();
    const snippet = await alice.locator('.snippet').first().textContent();
    expect(snippet.includes('数据库迁移'), `a Chinese snippet, got: ${snippet}`);
    await shot(alice, 'search-chinese');
    await accessible(alice, 'search results');
}

async function with_redis_stopped_the_strip_says_degraded_and_approvals_work() {
    const title = 'Without Redis';
    const {review, document: doc} = await env.api.pending(env.tokens.dave, title, 'No locks.');
    const {bob, alice} = env.pages;
    await go(bob, `#/reviews/${review.id}`, `Review: ${title}`);
    expect((await bob.locator('[data-dep="redis"] strong').textContent()) === 'ok',
           'Redis is ok before it stops');
    await env.redis.stop();
    await bob.locator('[data-dep="redis"] strong').filter({hasText: 'degraded'})
        .waitFor({timeout: STEP_MS});
    await bob.locator('[data-dep="service"] strong').filter({hasText: 'degraded'}).waitFor();
    await bob.getByRole('button', {name: 'Approve'}).click();
    const said = await noticeText(bob);
    expect(said === `Approved “${title}” without a lock fence (Redis was unavailable).`,
           `approved without Redis, got: ${said}`);
    await shot(bob, 'redis-degraded');
    await go(alice, `#/documents/${doc.id}`, title);
    await alice.locator('.history li').filter({hasText: 'no fence'}).waitFor();
}

// ---- the run ---------------------------------------------------------------

const checks = [
    dev_login_signs_known_roles_only,
    create_submit_approve_as_two_users,
    two_reviewers_at_once_get_one_success_and_one_clear_conflict,
    a_double_click_decides_once_and_says_so,
    markup_in_titles_content_and_comments_shows_as_text,
    a_reviewer_approves_with_the_keyboard_only,
    a_375_px_phone_needs_no_sideways_scroll,
    search_shows_snippets_in_chinese,
    with_redis_stopped_the_strip_says_degraded_and_approvals_work,
];

async function setUp() {
    fs.mkdirSync(SHOTS, {recursive: true});
    fs.mkdirSync(WORK, {recursive: true});
    const dir = fs.mkdtempSync(path.join(WORK, 'run-'));
    env = {problems: [], axePages: 0, dir};
    env.db = createDatabase();
    env.redis = await startRedis(dir);
    env.reviewd = await startReviewd(dir, env.db.url, env.redis.url);
    env.api = new ApiClient(env.reviewd.base);
    env.tokens = {
        alice: await env.api.token('alice', 'author'),
        dave: await env.api.token('dave', 'author'),
    };
    env.browser = await launchChromium();
}

async function tearDown() {
    const errors = [];
    for (const [what, fn] of [['browser', () => env.browser?.close()],
                              ['reviewd', () => env.reviewd?.stop()],
                              ['redis', () => env.redis?.stop()],
                              ['database', () => env.db?.drop()]]) {
        try {
            await fn();
        } catch (e) {
            errors.push(`${what}: ${e.message}`);
        }
    }
    return errors;
}

async function main() {
    const started = Date.now();
    let failed = 0;
    try {
        await setUp();
        console.log(`set up in ${Date.now() - started} ms (reviewd at ${env.reviewd.base})`);
        for (const check of checks) {
            const t0 = Date.now();
            try {
                await check();
                if (env.problems.length) {
                    throw new Error(env.problems.join('\n    '));
                }
                console.log(`ok - ${check.name} (${Date.now() - t0} ms)`);
            } catch (e) {
                failed += 1;
                console.log(`not ok - ${check.name} (${Date.now() - t0} ms)\n    ${e.message}`);
            }
            env.problems = [];
        }
    } catch (e) {
        failed += 1;
        console.log(`not ok - set up: ${e.message}`);
    }
    const errors = await tearDown();
    for (const e of errors) {
        failed += 1;
        console.log(`not ok - tear down: ${e}`);
    }
    if (failed && env?.reviewd) {
        console.log(`reviewd log (tail):\n${tail(env.reviewd.log)}`);
    }
    console.log(`${checks.length} checks, ${failed} failed, `
                + `axe on ${env?.axePages ?? 0} screens, screenshots in ${SHOTS}, `
                + `${Date.now() - started} ms`);
    if (!failed) {
        fs.rmSync(env.dir, {recursive: true, force: true});
    }
    process.exit(failed ? 1 : 0);
}

main();
