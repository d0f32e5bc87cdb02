// console/api.js: reviewd's public HTTP API (docs/api.md), as the
// console calls it, and the words a person reads when a call fails.
//
// Every call sends the session's bearer token; every failure becomes an
// ApiError carrying the API's {code, detail} (or NETWORK when reviewd did
// not answer), so views never parse responses themselves.  Decisions and
// submits carry an Idempotency-Key made once per attempt, so a retried
// request can never decide twice.

export class ApiError extends Error {
    constructor(status, code, detail) {
        super(detail || code);
        this.status = status;
        this.code = code;
        this.detail = detail || '';
    }
}

export class Api {
    // token(): the current bearer token or null.  onUnauthenticated():
    // called on any 401 (the session expired or the token is wrong).
    constructor(token, onUnauthenticated) {
        this.token = token;
        this.onUnauthenticated = onUnauthenticated;
    }

    async request(method, path, body, extraHeaders = {}) {
        const headers = {Accept: 'application/json', ...extraHeaders};
        const token = this.token();
        if (token) {
            headers.Authorization = `Bearer ${token}`;
        }
        const init = {method, headers, cache: 'no-store'};
        if (body !== undefined) {
            headers['Content-Type'] = 'application/json';
            init.body = JSON.stringify(body);
        }
        let res;
        try {
            res = await fetch(path, init);
        } catch (e) {
            throw new ApiError(0, 'NETWORK',
                               'reviewd did not answer; check the status strip and try again');
        }
        const data = await readJson(res);
        if (res.ok) {
            return data;
        }
        const err = new ApiError(res.status, data?.code || `HTTP_${res.status}`,
                                 data?.detail || res.statusText);
        if (res.status === 401) {
            this.onUnauthenticated(err);
        }
        throw err;
    }

    get(path) { return this.request('GET', path); }
    put(path, body) { return this.request('PUT', path, body); }
    post(path, body) {
        return this.request('POST', path, body,
                            {'Idempotency-Key': newIdempotencyKey()});
    }

    listDocuments(author, after) {
        const q = new URLSearchParams({author, limit: '20'});
        if (after) {
            q.set('after', after);
        }
        return this.get(`/v1/documents?${q}`);
    }
    document(id) {
        return this.get(`/v1/documents/${encodeURIComponent(id)}?include=content`);
    }
    documentReviews(id) {
        return this.get(`/v1/documents/${encodeURIComponent(id)}/reviews`);
    }
    createDocument(title, content) {
        return this.post('/v1/documents', {title, content});
    }
    updateDocument(id, title, content) {
        return this.put(`/v1/documents/${encodeURIComponent(id)}`, {title, content});
    }
    submit(id) {
        return this.post(`/v1/documents/${encodeURIComponent(id)}/submit`, {});
    }
    pendingReviews(after) {
        const q = new URLSearchParams({status: 'pending', limit: '10'});
        if (after) {
            q.set('after', after);
        }
        return this.get(`/v1/reviews?${q}`);
    }
    review(id) {
        return this.get(`/v1/reviews/${encodeURIComponent(id)}`);
    }
    decide(id, verdict, comment) {
        const body = comment ? {comment} : {};
        return this.post(`/v1/reviews/${encodeURIComponent(id)}/${verdict}`, body);
    }
    search(q) {
        return this.get(`/v1/search?${new URLSearchParams({q, limit: '20'})}`);
    }
    devLoginOffered() {
        return fetch('/v1/dev/token', {cache: 'no-store'})
            .then((res) => res.ok, () => false);
    }
    devToken(sub, role) {
        return this.request('POST', '/v1/dev/token', {sub, role});
    }
}

async function readJson(res) {
    const type = res.headers.get('Content-Type') || '';
    if (!type.startsWith('application/json')) {
        return null;
    }
    try {
        return await res.json();
    } catch (e) {
        return null;
    }
}

function newIdempotencyKey() {
    return `console-${crypto.randomUUID()}`;
}

// What a person should read for a failed call: the API's detail, in
// plain words for the codes a user meets in normal work.
export function describeError(err) {
    if (!(err instanceof ApiError)) {
        return `Something went wrong in the console: ${err.message}`;
    }
    switch (err.code) {
    case 'LOCK_BUSY':
        return 'Someone else is working on this right now. Try again in a moment.';
    case 'FORBIDDEN':
        return `Not allowed: ${err.detail}`;
    case 'UNAUTHENTICATED':
        return 'Your session is not valid (expired or wrong token). Sign in again.';
    case 'NOT_FOUND':
        return 'Not found: it may have been removed, or the id is wrong.';
    case 'UNAVAILABLE':
        return `reviewd cannot do this right now: ${err.detail}`;
    default:
        return err.detail || err.code;
    }
}

// The claims of a JWT (not verified here: reviewd verifies every call).
export function tokenClaims(token) {
    const parts = token.split('.');
    if (parts.length !== 3) {
        return null;
    }
    try {
        const b64 = parts[1].replace(/-/g, '+').replace(/_/g, '/');
        const json = new TextDecoder().decode(
            Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));
        const claims = JSON.parse(json);
        if (typeof claims.sub !== 'string' || typeof claims.role !== 'string') {
            return null;
        }
        return claims;
    } catch (e) {
        return null;
    }
}
