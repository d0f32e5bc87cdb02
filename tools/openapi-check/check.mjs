// tools/openapi-check/check.mjs: runs every operation of docs/openapi.yaml
// against a running reviewd and checks each answer against the spec.
//
//   node check.mjs SPEC   (env: REVIEWD_PORT, JWT_SECRET, REDIS_URL: the
//                          Redis that reviewd locks in)
//
// Why a script of its own: the spec is the contract clients code against,
// so the check reads it the way a client generator would (yaml, then
// ajv's draft 2020-12 validator, OpenAPI 3.1's schema dialect) instead of
// restating it in C.  tests/reviewd/test_reviewd_openapi.c gives it a
// fresh database and a reviewd of its own and stops both.
//
// What fails the check:
//   - an answer whose status the operation does not list, a required
//     header (X-Request-Id, Location, Allow) missing, a Content-Type or
//     body that does not match the listed response's schema (for errors
//     that includes which codes each status may carry);
//   - a 2xx or 4xx the spec lists for an operation that no request here
//     produced, or an error code a listed 4xx may carry that no request
//     produced (5xx need a failing dependency: described, not run), or an
//     operation never called;
//   - a path whose 405 Allow header is not exactly its methods in the spec
//     (plus HEAD wherever GET is), a HEAD that does not answer like its
//     GET, an unknown path that is not a JSON 404.
// Every request has a 10 s bound; the whole run takes a few seconds.
import { createHmac, randomInt } from "node:crypto";
import { readFileSync } from "node:fs";
import { connect } from "node:net";
import Ajv2020 from "ajv/dist/2020.js";
import YAML from "yaml";

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch"];
const REQUEST_TIMEOUT_MS = 10000;
const RACE_ROUNDS = 40;
const RACE_WIDTH = 8;

const specPath = process.argv[2];
const port = Number(process.env.REVIEWD_PORT);
const secret = process.env.JWT_SECRET;
const redisUrl = process.env.REDIS_URL ? new URL(process.env.REDIS_URL) : null;
if (!specPath || !port || !secret || redisUrl?.protocol !== "redis:") {
    console.error("usage: REVIEWD_PORT=N JWT_SECRET=S REDIS_URL=redis://... " +
                  "node check.mjs SPEC");
    process.exit(2);
}

const spec = YAML.parse(readFileSync(specPath, "utf8"));
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addSchema(spec, "openapi.json");

const failures = [];
function fail(msg) {
    failures.push(msg);
    console.error(`FAIL ${msg}`);
}

// ---- the spec ---------------------------------------------------------

function pointer(parts) {
    return parts
        .map((p) => encodeURIComponent(String(p).replace(/~/g, "~0")
            .replace(/\//g, "~1")))
        .join("/");
}

const validators = new Map();
function validatorAt(parts) {
    const ref = `openapi.json#/${pointer(parts)}`;
    if (!validators.has(ref)) {
        validators.set(ref, ajv.compile({ $ref: ref }));
    }
    return validators.get(ref);
}

// The object at parts and the pointer to it, through one $ref (responses
// and headers are often references to components).
function resolveAt(parts) {
    let node = parts.reduce((o, k) => o?.[k], spec);
    if (node?.$ref) {
        parts = node.$ref.replace(/^#\//, "").split("/")
            .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
        node = parts.reduce((o, k) => o?.[k], spec);
    }
    return { node, parts };
}

// operationId -> {method, path, responses: Set of status strings}
const ops = new Map();
for (const [path, item] of Object.entries(spec.paths)) {
    for (const method of METHODS) {
        if (item[method]) {
            ops.set(item[method].operationId, {
                method, path, statuses: Object.keys(item[method].responses),
            });
        }
    }
}
const seen = new Map([...ops.keys()].map((id) => [id, new Set()]));
// "opId status" -> the error codes seen with it
const seenCodes = new Map();

// The error codes a response allows (its schema's allOf code const/enum).
function codesOf(response) {
    const schema = Object.values(response?.content ?? {})[0]?.schema;
    const code = schema?.allOf?.[1]?.properties?.code;
    return code?.const ? [code.const] : (code?.enum ?? []);
}

// ---- HTTP on a plain socket (so that any method, header and declared
// length can be sent, and the answer read whole) -------------------------

function request(method, path, { headers = {}, body, raw } = {}) {
    return new Promise((resolve, reject) => {
        const sock = connect(port, "127.0.0.1");
        const chunks = [];
        const timer = setTimeout(() => {
            sock.destroy();
            reject(new Error(`${method} ${path}: no answer in ` +
                `${REQUEST_TIMEOUT_MS} ms`));
        }, REQUEST_TIMEOUT_MS);
        const h = { Host: `127.0.0.1:${port}`, Connection: "close", ...headers };
        if (body !== undefined && !("Content-Length" in h)) {
            h["Content-Length"] = Buffer.byteLength(body);
        }
        sock.on("connect", () => {
            let head = `${method} ${path} HTTP/1.1\r\n`;
            for (const [k, v] of Object.entries(h)) head += `${k}: ${v}\r\n`;
            sock.write(head + "\r\n");
            if (body !== undefined && !raw) sock.write(body);
        });
        sock.on("data", (d) => chunks.push(d));
        sock.on("error", (e) => {
            clearTimeout(timer);
            reject(new Error(`${method} ${path}: ${e.message}`));
        });
        sock.on("close", () => {
            clearTimeout(timer);
            const all = Buffer.concat(chunks).toString("utf8");
            const end = all.indexOf("\r\n\r\n");
            if (end < 0) {
                reject(new Error(`${method} ${path}: no complete answer`));
                return;
            }
            const lines = all.slice(0, end).split("\r\n");
            const status = Number(lines[0].split(" ")[1]);
            const hdrs = {};
            for (const line of lines.slice(1)) {
                const i = line.indexOf(":");
                hdrs[line.slice(0, i).trim().toLowerCase()] =
                    line.slice(i + 1).trim();
            }
            resolve({ method, path, status, headers: hdrs,
                      body: all.slice(end + 4) });
        });
    });
}

// ---- Redis: holding one of reviewd's locks by hand (its keys are the
// contract's names), as tests/reviewd/test_reviewd_locks.c does ---------

function redis(...args) {
    const db = redisUrl.pathname.slice(1) || "0";
    const resp = (cmd) => `*${cmd.length}\r\n` + cmd.map(
        (a) => `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`).join("");
    return new Promise((resolve, reject) => {
        const sock = connect(Number(redisUrl.port || 6379), redisUrl.hostname);
        const chunks = [];
        const timer = setTimeout(() => {
            sock.destroy();
            reject(new Error(`redis ${args[0]}: no answer`));
        }, REQUEST_TIMEOUT_MS);
        sock.on("connect", () => sock.write(
            resp(["SELECT", db]) + resp(args) + resp(["QUIT"])));
        sock.on("data", (d) => chunks.push(d));
        sock.on("error", (e) => {
            clearTimeout(timer);
            reject(new Error(`redis ${args[0]}: ${e.message}`));
        });
        sock.on("close", () => {
            clearTimeout(timer);
            const text = Buffer.concat(chunks).toString();
            if (text.split("\r\n").some((l) => l.startsWith("-"))) {
                reject(new Error(`redis ${args.join(" ")}: ${text}`));
            } else {
                resolve(text);
            }
        });
    });
}

// Runs fn while key is held by someone else; then frees the key and the
// fence counter reviewd keeps beside it.
async function whileHeld(key, fn) {
    await redis("SET", key, "openapi-check-holds-it", "PX", "30000");
    try {
        await fn();
    } finally {
        await redis("DEL", key, `{${key}}:fence`);
    }
}

// ---- tokens -------------------------------------------------------------

function b64url(s) {
    return Buffer.from(s).toString("base64url");
}

function token(sub, role, ttl = 600, key = secret) {
    const now = Math.floor(Date.now() / 1000);
    const head = b64url(JSON.stringify({ alg: "HS256", typ: "JWT" }));
    const claims = b64url(JSON.stringify({ sub, role, iat: now,
                                           exp: now + ttl }));
    const sig = createHmac("sha256", key).update(`${head}.${claims}`)
        .digest("base64url");
    return `${head}.${claims}.${sig}`;
}

const alice = token("alice", "author");
const dave = token("dave", "author");
const bob = token("bob", "reviewer");
const carol = token("carol", "reviewer");
const root = token("root", "admin");
const expired = token("alice", "author", -60);
const forged = token("alice", "author", 600, "not-the-secret-0123456789abcdef");

// ---- checking one answer against the spec -----------------------------

// Checks res as an answer of the response object at parts.
function checkResponse(label, res, parts) {
    const { node, parts: at } = resolveAt(parts);
    if (!node) {
        fail(`${label}: status ${res.status} is not in the spec`);
        return null;
    }
    for (const name of Object.keys(node.headers ?? {})) {
        const { node: h, parts: hat } = resolveAt([...at, "headers", name]);
        const v = res.headers[name.toLowerCase()];
        if (v === undefined) {
            if (h.required) fail(`${label}: header ${name} missing`);
            continue;
        }
        const ok = validatorAt([...hat, "schema"]);
        if (!ok(v)) fail(`${label}: header ${name}: ${v} does not match`);
    }
    if (!node.content) {
        return null;
    }
    const [media] = Object.keys(node.content);
    const ct = res.headers["content-type"] ?? "";
    if (ct !== media) {
        fail(`${label}: Content-Type ${ct}, the spec says ${media}`);
    }
    if (res.method === "HEAD") {
        if (res.body !== "") fail(`${label}: HEAD answered with a body`);
        return null;
    }
    let value = res.body;
    if (media === "application/json") {
        try {
            value = JSON.parse(res.body);
        } catch (e) {
            fail(`${label}: body is not JSON: ${res.body.slice(0, 200)}`);
            return null;
        }
    }
    const validate = validatorAt([...at, "content", media, "schema"]);
    if (!validate(value)) {
        fail(`${label}: body does not match the schema: ` +
             `${ajv.errorsText(validate.errors)}: ${res.body.slice(0, 300)}`);
    }
    return value;
}

// Sends a request for operation opId and checks the answer; want (a
// status) says what this case is for, so a wrong answer that the spec
// happens to allow still fails.  Returns the parsed body.
async function call(opId, want, { id, query = "", token: tok, body,
                                  headers = {}, contentType, raw } = {}) {
    const op = ops.get(opId);
    let path = op.path.replace("{id}", id ?? "");
    path += query;
    const h = { ...headers };
    if (tok) h.Authorization = `Bearer ${tok}`;
    if (body !== undefined) {
        h["Content-Type"] = contentType ?? "application/json";
    }
    const res = await request(op.method.toUpperCase(), path,
                              { headers: h, body, raw });
    const label = `${opId} ${op.method.toUpperCase()} ${path} (want ${want})`;
    if (want !== undefined && res.status !== want) {
        fail(`${label}: got ${res.status} ${res.body.slice(0, 200)}`);
    }
    seen.get(opId).add(String(res.status));
    const value = checkResponse(label, res,
                                ["paths", op.path, op.method, "responses",
                                 String(res.status)]);
    if (typeof value?.code === "string") {
        const k = `${opId} ${res.status}`;
        if (!seenCodes.has(k)) seenCodes.set(k, new Set());
        seenCodes.get(k).add(value.code);
    }
    return { res, value };
}

// ---- the cases ----------------------------------------------------------

// An id no row has: ids start at a random offset far below, and a random
// one keeps the lock keys of two runs on one Redis apart.
const MISSING = `8${String(randomInt(1e12)).padStart(12, "0")}000001`;
const big = { "Content-Length": "1048577" };

async function documents() {
    const created = await call("createDocument", 201, {
        token: alice, body: JSON.stringify({ title: "Runbook",
                                             content: "How to restart." }) });
    const docId = created.value?.id;
    const loc = created.res.headers.location;
    if (loc !== `/v1/documents/${docId}`) {
        fail(`createDocument: Location ${loc} for document ${docId}`);
    }
    const echo = await request("GET", "/healthz",
                               { headers: { "X-Request-Id": "trace-me-1" } });
    if (echo.headers["x-request-id"] !== "trace-me-1") {
        fail(`X-Request-Id not echoed: ${echo.headers["x-request-id"]}`);
    }

    const once = JSON.stringify({ title: "Once", content: "x" });
    const first = await call("createDocument", 201, {
        token: alice, body: once, headers: { "Idempotency-Key": "oa-create" } });
    const replay = await call("createDocument", 201, {
        token: alice, body: once, headers: { "Idempotency-Key": "oa-create" } });
    if (replay.res.body !== first.res.body) {
        fail("createDocument: a replay answered another body");
    }
    await call("createDocument", 422, {
        token: alice, headers: { "Idempotency-Key": "oa-create" },
        body: JSON.stringify({ title: "Other", content: "y" }) });
    await call("createDocument", 400, { token: alice, body: "not json" });
    await call("createDocument", 400, {
        token: alice, body: JSON.stringify({ title: "", content: "x" }) });
    await call("createDocument", 400, {
        token: alice, body: JSON.stringify({ title: "t", content: "x", x: 1 }) });
    await call("createDocument", 400, {
        token: alice, body: once, headers: { "Idempotency-Key": "two words" } });
    await call("createDocument", 401, { body: once });
    await call("createDocument", 401, { token: expired, body: once });
    await call("createDocument", 401, { token: forged, body: once });
    await call("createDocument", 403, { token: bob, body: once });
    await call("createDocument", 413, { token: alice, body: "",
                                        headers: big, raw: true });
    await call("createDocument", 415, { token: alice, body: once,
                                        contentType: "text/plain" });
    await idempotencyTwins();

    await call("getDocument", 200, { id: docId, token: bob });
    const full = await call("getDocument", 200, {
        id: docId, token: dave, query: "?include=content" });
    if (full.value?.content !== "How to restart.") {
        fail(`getDocument: include=content gave ${full.res.body}`);
    }
    await call("getDocument", 400, { id: "abc", token: bob });
    await call("getDocument", 400, { id: "0", token: bob });
    await call("getDocument", 400, { id: docId, token: bob,
                                     query: "?include=all" });
    await call("getDocument", 400, { id: docId, token: bob, query: "?x=1" });
    await call("getDocument", 401, { id: docId });
    await call("getDocument", 404, { id: MISSING, token: bob });

    const edit = JSON.stringify({ title: "Runbook v2" });
    const edited = await call("updateDocument", 200, {
        id: docId, token: alice, body: edit });
    if (edited.value?.version !== 2) {
        fail(`updateDocument: version ${edited.value?.version}, want 2`);
    }
    await call("updateDocument", 400, { id: docId, token: alice, body: "{}" });
    await call("updateDocument", 400, { id: docId, token: alice, body: "[" });
    await call("updateDocument", 401, { id: docId, body: edit });
    await call("updateDocument", 403, { id: docId, token: dave, body: edit });
    await call("updateDocument", 404, { id: MISSING, token: alice,
                                        body: edit });
    await call("updateDocument", 413, { id: docId, token: alice, body: "",
                                        headers: big, raw: true });
    await call("updateDocument", 415, { id: docId, token: alice, body: edit,
                                        contentType: "application/xml" });
    return docId;
}

// Twins with one Idempotency-Key: while the first runs, the others get
// 409 LOCK_BUSY, after it they get its replay.  Whether a twin lands
// inside the first one's transaction is up to the scheduler, so rounds
// of RACE_WIDTH concurrent twins run until one does (bounded).
async function idempotencyTwins() {
    const body = JSON.stringify({ title: "Twin", content: "t".repeat(4096) });
    for (let round = 0; round < RACE_ROUNDS; round++) {
        const headers = { "Idempotency-Key": `oa-twin-${round}` };
        const answers = await Promise.all(
            Array.from({ length: RACE_WIDTH }, () => call(
                "createDocument", undefined, { token: alice, body, headers })));
        for (const a of answers) {
            if (a.res.status !== 201 && a.res.status !== 409) {
                fail(`createDocument twin: ${a.res.status} ${a.res.body}`);
            }
        }
        if (answers.some((a) => a.res.status === 409)) return;
    }
    fail(`createDocument: no twin was busy in ${RACE_ROUNDS} rounds`);
}

async function lifecycle(docId) {
    await call("submitDocument", 403, { id: docId, token: dave });
    await call("submitDocument", 400, { id: docId, token: alice,
                                        body: JSON.stringify({ x: 1 }) });
    await call("submitDocument", 400, { id: docId, token: alice, body: "[" });
    await whileHeld(`lock:doc:submit:${docId}`, () => call(
        "submitDocument", 409, { id: docId, token: alice }));
    await call("submitDocument", 415, { id: docId, token: alice, body: "{}",
                                        contentType: "text/plain" });
    await call("submitDocument", 413, { id: docId, token: alice, body: "",
                                        headers: big, raw: true });
    await call("submitDocument", 401, { id: docId });
    await call("submitDocument", 404, { id: MISSING, token: alice });
    const key = { "Idempotency-Key": "oa-submit" };
    const sub = await call("submitDocument", 201, {
        id: docId, token: alice, headers: key });
    const reviewId = sub.value?.review?.id;
    await call("submitDocument", 422, { id: docId, token: alice, body: "{}",
                                        headers: key });
    await call("submitDocument", 409, { id: docId, token: alice });
    await call("updateDocument", 409, {
        id: docId, token: alice, body: JSON.stringify({ content: "late" }) });

    await call("getReview", 200, { id: reviewId, token: alice });
    await call("getReview", 400, { id: "-1", token: alice });
    await call("getReview", 401, { id: reviewId });
    await call("getReview", 404, { id: MISSING, token: alice });

    await call("approveReview", 403, { id: reviewId, token: alice });
    await call("approveReview", 400, {
        id: reviewId, token: bob, body: JSON.stringify({ comment: 5 }) });
    await call("approveReview", 400, { id: reviewId, token: bob, body: "{" });
    await whileHeld(`lock:doc:review:${reviewId}`, () => call(
        "approveReview", 409, { id: reviewId, token: bob }));
    await call("approveReview", 415, { id: reviewId, token: bob, body: "{}",
                                       contentType: "text/plain" });
    await call("approveReview", 413, { id: reviewId, token: bob, body: "",
                                       headers: big, raw: true });
    await call("approveReview", 401, { id: reviewId });
    await call("approveReview", 404, { id: MISSING, token: bob });
    const akey = { "Idempotency-Key": "oa-approve" };
    const approved = await call("approveReview", 200, {
        id: reviewId, token: bob, headers: akey,
        body: JSON.stringify({ comment: "fine" }) });
    if (approved.value?.review?.status !== "approved"
        || approved.value?.document?.status !== "approved") {
        fail(`approveReview: ${approved.res.body}`);
    }
    await call("approveReview", 422, { id: reviewId, token: bob, headers: akey,
                                       body: JSON.stringify({ comment: "no" }) });
    await call("approveReview", 409, { id: reviewId, token: carol });

    // Four eyes: an admin may not decide a review of their own document.
    const own = await call("createDocument", 201, {
        token: root, body: JSON.stringify({ title: "Mine", content: "m" }) });
    const ownSub = await call("submitDocument", 201, { id: own.value?.id,
                                                       token: root });
    await call("approveReview", 403, { id: ownSub.value?.review?.id,
                                       token: root });

    // A second document for reject.
    const doc2 = await call("createDocument", 201, {
        token: dave, body: JSON.stringify({ title: "Draft 2", content: "d" }) });
    const sub2 = await call("submitDocument", 201, { id: doc2.value?.id,
                                                     token: dave });
    const r2 = sub2.value?.review?.id;
    const reason = JSON.stringify({ comment: "needs work" });
    await call("rejectReview", 400, { id: r2, token: carol });
    await call("rejectReview", 400, { id: r2, token: carol,
                                      body: JSON.stringify({ comment: "" }) });
    await call("rejectReview", 403, { id: r2, token: dave, body: reason });
    await whileHeld(`lock:doc:review:${r2}`, () => call(
        "rejectReview", 409, { id: r2, token: carol, body: reason }));
    await call("rejectReview", 415, { id: r2, token: carol, body: reason,
                                      contentType: "text/html" });
    await call("rejectReview", 413, { id: r2, token: carol, body: "",
                                      headers: big, raw: true });
    await call("rejectReview", 401, { id: r2, body: reason });
    await call("rejectReview", 404, { id: MISSING, token: carol,
                                      body: reason });
    const rkey = { "Idempotency-Key": "oa-reject" };
    await call("rejectReview", 200, { id: r2, token: carol, body: reason,
                                      headers: rkey });
    await call("rejectReview", 422, { id: r2, token: carol, headers: rkey,
                                      body: JSON.stringify({ comment: "x" }) });
    await call("rejectReview", 409, { id: r2, token: bob, body: reason });
}

async function lists(docId) {
    const page = await call("listReviews", 200, {
        token: bob, query: "?status=approved&limit=1" });
    await call("listReviews", 200, { token: root, query: "?limit=1" + (
        page.value?.next ? `&after=${page.value.next}` : "") });
    await call("listReviews", 200, { token: bob });
    await call("listReviews", 400, { token: bob, query: "?limit=0" });
    await call("listReviews", 400, { token: bob, query: "?status=open" });
    await call("listReviews", 400, { token: bob, query: "?page=2" });
    await call("listReviews", 400, { token: bob, query: "?limit=1&limit=2" });
    await call("listReviews", 401, {});
    await call("listReviews", 403, { token: alice });

    const mine = await call("listDocuments", 200, {
        token: bob, query: "?author=alice&limit=1" });
    if (mine.value?.items?.[0]?.author !== "alice") {
        fail(`listDocuments: author=alice gave ${mine.res.body}`);
    }
    await call("listDocuments", 200, { token: dave, query: "?limit=1" + (
        mine.value?.next ? `&after=${mine.value.next}` : "") });
    await call("listDocuments", 400, { token: bob, query: "?author=" });
    await call("listDocuments", 400, { token: bob, query: "?status=draft" });
    await call("listDocuments", 401, {});

    await call("listDocumentReviews", 200, { id: docId, token: dave });
    await call("listDocumentReviews", 400, { id: docId, token: dave,
                                             query: "?limit=201" });
    await call("listDocumentReviews", 400, { id: "abc", token: dave });
    await call("listDocumentReviews", 401, { id: docId });
    await call("listDocumentReviews", 404, { id: MISSING, token: dave });

    await call("search", 200, { token: alice, query: "?q=runbook&limit=5" });
    await call("search", 400, { token: alice });
    await call("search", 400, { token: alice, query: "?q=a&limit=51" });
    await call("search", 401, { query: "?q=a" });

    for (const op of ["healthz", "readyz", "metrics"]) {
        await call(op, 200, {});
        await call(op, 400, { query: "?x=%FF" });
    }
}

// 405 with the spec's methods in Allow, HEAD like GET, unknown paths 404.
async function shapes(ids) {
    const fill = (p) => p.replace("{id}", p.startsWith("/v1/reviews")
                                              ? ids.review : ids.doc);
    for (const [path, item] of Object.entries(spec.paths)) {
        const methods = METHODS.filter((m) => item[m]).map((m) => m.toUpperCase());
        if (methods.includes("GET")) methods.push("HEAD");
        const res = await request("DELETE", fill(path),
                                  { headers: { Authorization: `Bearer ${root}` } });
        const label = `DELETE ${path} (want 405)`;
        if (res.status !== 405) fail(`${label}: got ${res.status}`);
        checkResponse(label, res, ["components", "responses",
                                   "MethodNotAllowed"]);
        const allow = (res.headers.allow ?? "").split(",").map((s) => s.trim());
        if (allow.sort().join() !== [...methods].sort().join()) {
            fail(`${label}: Allow "${res.headers.allow}", the spec has ` +
                 `${methods.join(", ")}`);
        }
        if (item.get) {
            const h = { Authorization: `Bearer ${root}` };
            const q = path === "/v1/search" ? "?q=runbook" : "";
            const get = await request("GET", fill(path) + q, { headers: h });
            const head = await request("HEAD", fill(path) + q, { headers: h });
            const hl = `HEAD ${path}`;
            if (head.status !== get.status) {
                fail(`${hl}: ${head.status}, GET gave ${get.status}`);
            }
            checkResponse(hl, head, ["paths", path, "get", "responses",
                                     String(head.status)]);
        }
    }
    for (const path of ["/v1/nope", "/v1/documents/", "/v1/reviews/1/x"]) {
        const res = await request("GET", path,
                                  { headers: { Authorization: `Bearer ${root}` } });
        if (res.status !== 404) fail(`GET ${path}: ${res.status}, want 404`);
        checkResponse(`GET ${path}`, res, ["components", "responses",
                                           "UnknownPath"]);
    }
}

function coverage() {
    for (const [opId, op] of ops) {
        for (const status of op.statuses) {
            if (Number(status) >= 500) continue;
            if (!seen.get(opId).has(status)) {
                fail(`${opId}: the spec lists ${status}, no case produced it`);
                continue;
            }
            const { node } = resolveAt(["paths", op.path, op.method,
                                        "responses", status]);
            const got = seenCodes.get(`${opId} ${status}`) ?? new Set();
            for (const code of codesOf(node)) {
                if (!got.has(code)) {
                    fail(`${opId}: the spec lets ${status} carry ${code}, ` +
                         "no case produced it");
                }
            }
        }
        if (seen.get(opId).size === 0) fail(`${opId}: never called`);
    }
}

try {
    const docId = await documents();
    await lifecycle(docId);
    await lists(docId);
    const review = (await call("listReviews", 200, { token: bob }))
        .value?.items?.[0]?.id;
    await shapes({ doc: docId, review });
    coverage();
} catch (e) {
    fail(e.stack ?? String(e));
}
const calls = [...seen.values()].reduce((n, s) => n + s.size, 0);
console.log(`openapi-check: ${ops.size} operations, ${calls} ` +
            `(operation, status) pairs seen, ${failures.length} failures`);
process.exit(failures.length === 0 ? 0 : 1);
