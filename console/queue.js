// console/queue.js: the reviewer's screens: the paged queue of pending
// reviews and one review with its document's content and the decision
// form.
//
// A decision that loses a race is normal here, not an error page: the
// API answers 409 LOCK_BUSY while another request holds the review's
// lock and 409 INVALID_STATE once the review is decided, and the console
// turns those into "someone else is deciding this review right now" or
// "already approved by bob at 14:02", then shows the refreshed queue.
import {ApiError, describeError} from './api.js';
import {h, formatTime, timeEl} from './dom.js';
import {reviewSummary, statusBadge} from './documents.js';

// Keyset pages: `pages` holds the `after` of each page seen, so
// "Previous" goes back without offsets.
export async function renderQueue(ctx) {
    const pages = [null];
    const region = h('div', {});
    const render = async () => {
        const page = await ctx.api.pendingReviews(pages[pages.length - 1]);
        const docs = await Promise.all(page.items.map((r) =>
            ctx.api.get(`/v1/documents/${r.document_id}`).catch(() => null)));
        region.replaceChildren(queueList(page.items, docs),
                               pager(pages, page.next, () => render().catch(fail)));
    };
    const fail = (err) => ctx.notify('error', describeError(err));
    await render();
    ctx.show(h('h1', {tabindex: '-1'}, 'Review queue'),
             h('p', {}, h('button', {type: 'button', onclick: () => {
                 pages.splice(1);
                 render().catch(fail);
             }}, 'Refresh')),
             region);
}

function queueList(reviews, docs) {
    if (reviews.length === 0) {
        return h('p', {}, 'Nothing waits for review.');
    }
    return h('ul', {class: 'items', 'aria-label': 'Pending reviews'},
             reviews.map((r, i) => h('li', {class: 'item'},
                 h('a', {href: `#/reviews/${r.id}`},
                   docs[i] ? docs[i].title : `Document #${r.document_id}`),
                 h('span', {class: 'meta'}, ` review #${r.id}, version ${r.document_version}, `
                   + `submitted by ${r.submitted_by} at `, timeEl(r.created_at)))));
}

function pager(pages, next, rerender) {
    const prev = h('button', {type: 'button', disabled: pages.length === 1}, 'Previous page');
    const fwd = h('button', {type: 'button', disabled: !next}, 'Next page');
    prev.addEventListener('click', () => {
        pages.pop();
        rerender();
    });
    fwd.addEventListener('click', () => {
        pages.push(next);
        rerender();
    });
    return h('nav', {class: 'pager', 'aria-label': 'Queue pages'}, prev,
             h('span', {}, ` Page ${pages.length} `), fwd);
}

export async function renderReview(ctx, id) {
    const review = await ctx.api.review(id);
    const doc = await ctx.api.document(review.document_id);
    const canDecide = review.status === 'pending'
        && (ctx.claims.role === 'reviewer' || ctx.claims.role === 'admin');
    ctx.show(
        h('h1', {tabindex: '-1'}, `Review: ${doc.title}`),
        h('p', {class: 'meta'}, reviewSummary(review)),
        h('p', {class: 'meta'}, 'Document ', statusBadge(doc.status),
          ` by ${doc.author}, version ${doc.version}. `,
          h('a', {href: `#/documents/${doc.id}`}, 'Open the document')),
        review.document_version !== doc.version
            ? h('p', {class: 'notice-error'}, `The document is now at version ${doc.version}; `
                + `this review is of version ${review.document_version}.`)
            : null,
        h('section', {'aria-labelledby': 'content-h'},
          h('h2', {id: 'content-h'}, 'Content'),
          h('div', {class: 'content'}, doc.content || '')),
        canDecide ? decisionForm(ctx, review, doc) : null);
}

function decisionForm(ctx, review, doc) {
    const comment = h('textarea', {id: 'comment', rows: '4', maxlength: '2000',
                                   'aria-describedby': 'comment-help'});
    const approve = h('button', {type: 'submit', value: 'approve', class: 'primary'}, 'Approve');
    const reject = h('button', {type: 'submit', value: 'reject', class: 'danger'}, 'Reject');
    const form = h('form', {class: 'card', 'aria-labelledby': 'decide-h'},
                   h('h2', {id: 'decide-h'}, 'Decision'),
                   h('label', {for: 'comment'}, 'Comment'),
                   h('p', {id: 'comment-help', class: 'help'},
                     'Optional to approve, required to reject (up to 2000 characters).'),
                   comment,
                   h('div', {class: 'actions'}, approve, reject));
    form.addEventListener('submit', async (e) => {
        e.preventDefault();
        const verdict = e.submitter ? e.submitter.value : 'approve';
        if (verdict === 'reject' && !comment.value.trim()) {
            ctx.notify('error', 'A rejection needs a comment for the author.');
            comment.focus();
            return;
        }
        approve.disabled = true;
        reject.disabled = true;
        await decide(ctx, review, doc, verdict, comment.value.trim());
        approve.disabled = false;
        reject.disabled = false;
    });
    return form;
}

async function decide(ctx, review, doc, verdict, comment) {
    try {
        const res = await ctx.api.decide(review.id, verdict, comment);
        const r = res.review;
        const fence = r.fence ? `under lock fence ${r.fence}`
                              : 'without a lock fence (Redis was unavailable)';
        ctx.notify('ok', `${verdict === 'approve' ? 'Approved' : 'Rejected'} “${doc.title}” `
                   + `${fence}.`, {sticky: true});
    } catch (err) {
        if (!(err instanceof ApiError) || err.status !== 409) {
            ctx.notify('error', describeError(err), {focus: true});
            return;
        }
        ctx.notify('error', await conflictWords(ctx, review.id, err), {sticky: true});
    }
    ctx.refreshStatus();
    ctx.go('#/queue');
}

// The 409 in words: who holds it, or who decided it and when.
async function conflictWords(ctx, id, err) {
    if (err.code === 'LOCK_BUSY') {
        return 'Someone else is deciding this review right now. '
            + 'It stays in the queue if they do not finish.';
    }
    try {
        const r = await ctx.api.review(id);
        if (r.status !== 'pending') {
            return `This review was already ${r.status} by ${r.reviewer} `
                + `at ${formatTime(r.decided_at)}.`;
        }
    } catch (e) {
        // Fall through to the API's own words.
    }
    return `This review cannot be decided now: ${err.detail}`;
}
