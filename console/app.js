// console/app.js: the review console's entry point: the session, the
// page shell (navigation, status strip, notices) and the hash router.
//
// One module per screen (signin, documents, queue, search) renders into
// <main id="view"> through the context object made here; this file owns
// the only state that outlives a screen: the token (sessionStorage, so
// it dies with the tab), the notice shown to the person, and the status
// strip's timer.  Routes are hashes (#/documents/7) so that reviewd
// serves one page and the browser's back button works.
import {Api, describeError, tokenClaims} from './api.js';
import {replace, h} from './dom.js';
import {startStatusStrip} from './status.js';
import {renderSignIn} from './signin.js';
import {renderDocuments, renderDocument, renderNewDocument} from './documents.js';
import {renderQueue, renderReview} from './queue.js';
import {renderSearch} from './search.js';

const TOKEN_KEY = 'dlock-console-token';

const session = {
    token: sessionStorage.getItem(TOKEN_KEY),
    claims: null,
};
session.claims = session.token ? tokenClaims(session.token) : null;

const api = new Api(() => session.token, (err) => {
    signOut(describeError(err));
});

// The notice survives exactly one navigation when an action asks it to
// (a decision's outcome shown above the refreshed queue).
let noticeSticky = false;

function notify(kind, text, {sticky = false, focus = false} = {}) {
    const el = document.getElementById('notice');
    const p = h('p', {class: `notice-${kind}`,
                      role: kind === 'error' ? 'alert' : 'status'}, text);
    replace(el, p);
    noticeSticky = sticky;
    if (focus) {
        el.focus();
    }
}

function clearNotice() {
    replace(document.getElementById('notice'));
}

function signIn(token) {
    const claims = tokenClaims(token);
    if (!claims) {
        return 'That is not a token reviewd issues (a JWT with sub and role).';
    }
    if (typeof claims.exp === 'number' && claims.exp * 1000 < Date.now()) {
        return 'That token has expired.';
    }
    session.token = token;
    session.claims = claims;
    sessionStorage.setItem(TOKEN_KEY, token);
    showShell();
    go(homeFor(claims.role));
    return null;
}

function signOut(reason) {
    session.token = null;
    session.claims = null;
    sessionStorage.removeItem(TOKEN_KEY);
    showShell();
    if (reason) {
        notify('error', reason, {sticky: true});
    }
    go('#/signin');
}

function homeFor(role) {
    return role === 'reviewer' ? '#/queue' : '#/documents';
}

function showShell() {
    const claims = session.claims;
    document.getElementById('nav').hidden = !claims;
    document.getElementById('who').hidden = !claims;
    if (!claims) {
        return;
    }
    document.getElementById('who-name').textContent =
        `Signed in as ${claims.sub} (${claims.role})`;
    for (const li of document.querySelectorAll('#nav li')) {
        li.hidden = !li.dataset.roles.split(' ').includes(claims.role);
    }
}

function go(hash) {
    if (location.hash === hash) {
        route();
    } else {
        location.hash = hash;
    }
}

// Routes: [pattern, screen, roles allowed (null: any signed-in role)].
const routes = [
    [/^#\/documents$/, renderDocuments, ['author', 'admin']],
    [/^#\/documents\/new$/, renderNewDocument, ['author', 'admin']],
    [/^#\/documents\/(\d+)$/, renderDocument, null],
    [/^#\/queue$/, renderQueue, ['reviewer', 'admin']],
    [/^#\/reviews\/(\d+)$/, renderReview, null],
    [/^#\/search(?:\?(.*))?$/, renderSearch, null],
];

let routeSerial = 0;

async function route() {
    const serial = ++routeSerial;
    const view = document.getElementById('view');
    if (noticeSticky) {
        noticeSticky = false;
    } else {
        clearNotice();
    }
    markCurrentNav();
    const ctx = makeContext(view, serial);
    if (!session.claims) {
        await renderSignIn(ctx);
        return;
    }
    for (const [pattern, screen, roles] of routes) {
        const m = location.hash.match(pattern);
        if (!m) {
            continue;
        }
        if (roles && !roles.includes(session.claims.role)) {
            break;
        }
        try {
            await screen(ctx, ...m.slice(1));
        } catch (err) {
            if (ctx.current()) {
                ctx.show(h('h1', {tabindex: '-1'}, 'Could not load this page'),
                         h('p', {}, describeError(err)));
            }
        }
        return;
    }
    go(homeFor(session.claims.role));
}

function markCurrentNav() {
    for (const a of document.querySelectorAll('#nav a')) {
        const here = location.hash.startsWith(a.getAttribute('href'));
        if (here) {
            a.setAttribute('aria-current', 'page');
        } else {
            a.removeAttribute('aria-current');
        }
    }
}

// What a screen gets: the API, who is signed in, and ways to show
// itself, navigate and tell the person something.  current() is false
// once the person has moved on, so a slow answer never paints over the
// next screen.
function makeContext(view, serial) {
    return {
        api,
        claims: session.claims,
        current: () => serial === routeSerial,
        show(...children) {
            if (serial !== routeSerial) {
                return;
            }
            replace(view, ...children);
            const heading = view.querySelector('h1');
            document.title = heading ? `${heading.textContent} · dlock review console`
                                     : 'dlock review console';
            if (heading && document.activeElement !== document.getElementById('notice')) {
                heading.focus();
            }
        },
        go,
        notify,
        signIn,
        refreshStatus: () => statusStrip.refresh(),
    };
}

let statusStrip;

function boot() {
    document.getElementById('sign-out').addEventListener('click', () => signOut(null));
    // The skip link moves focus itself: following href="#view" would
    // change the hash, which is the router's.
    document.querySelector('.skip').addEventListener('click', (e) => {
        e.preventDefault();
        document.getElementById('view').focus();
    });
    statusStrip = startStatusStrip(document.getElementById('status-list'));
    showShell();
    window.addEventListener('hashchange', route);
    if (!location.hash || location.hash === '#') {
        history.replaceState(null, '',
                             session.claims ? homeFor(session.claims.role) : '#/signin');
    }
    route();
}

if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', boot);
} else {
    boot();
}
