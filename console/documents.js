// console/documents.js: the author's screens: their documents (paged),
// a new document, and one document with its content, an edit form and
// a submit button while it is a draft or rejected, and the history of
// its reviews with each decision's comment and lock fence.
import {ApiError, describeError} from './api.js';
import {h, timeEl} from './dom.js';

const STATUS_WORDS = {
    draft: 'Draft',
    pending_review: 'Pending review',
    approved: 'Approved',
    rejected: 'Rejected',
    pending: 'Pending',
};

export function statusBadge(status) {
    return h('span', {class: `badge badge-${status}`}, STATUS_WORDS[status] || status);
}

export async function renderDocuments(ctx) {
    const list = h('ul', {class: 'items', 'aria-label': 'Documents'});
    const more = h('button', {type: 'button', hidden: true}, 'Show more');
    let next = null;

    async function load() {
        const page = await ctx.api.listDocuments(ctx.claims.sub, next);
        for (const d of page.items) {
            list.appendChild(documentItem(d));
        }
        next = page.next;
        more.hidden = !next;
        if (!list.firstChild) {
            list.appendChild(h('li', {}, 'No documents yet.'));
        }
    }
    more.addEventListener('click', () => load().catch((err) =>
        ctx.notify('error', describeError(err))));
    await load();
    ctx.show(h('h1', {tabindex: '-1'}, 'Your documents'),
             h('p', {}, h('a', {href: '#/documents/new', class: 'button'}, 'New document')),
             list, more);
}

function documentItem(d) {
    return h('li', {class: 'item'},
             h('a', {href: `#/documents/${d.id}`}, d.title),
             ' ', statusBadge(d.status),
             h('span', {class: 'meta'}, ` version ${d.version}, updated `,
               timeEl(d.updated_at)));
}

// A title input and a content textarea, labelled; values from doc.
function documentFields(doc) {
    return [
        h('label', {for: 'doc-title'}, 'Title'),
        h('input', {id: 'doc-title', name: 'title', type: 'text', required: true,
                    maxlength: '200', value: doc ? doc.title : ''}),
        h('label', {for: 'doc-content'}, 'Content'),
        h('textarea', {id: 'doc-content', name: 'content', rows: '10',
                       value: doc ? doc.content || '' : ''}),
    ];
}

// [title, content] as typed into documentFields().
function fieldValues(form) {
    return [form.querySelector('#doc-title').value,
            form.querySelector('#doc-content').value];
}

export async function renderNewDocument(ctx) {
    const form = h('form', {class: 'card'}, documentFields(null),
                   h('button', {type: 'submit'}, 'Create draft'));
    form.addEventListener('submit', async (e) => {
        e.preventDefault();
        const button = form.querySelector('button');
        button.disabled = true;
        try {
            const doc = await ctx.api.createDocument(...fieldValues(form));
            ctx.notify('ok', `Created draft “${doc.title}”.`, {sticky: true});
            ctx.go(`#/documents/${doc.id}`);
        } catch (err) {
            ctx.notify('error', describeError(err), {focus: true});
            button.disabled = false;
        }
    });
    ctx.show(h('h1', {tabindex: '-1'}, 'New document'), form);
}

export async function renderDocument(ctx, id) {
    const doc = await ctx.api.document(id);
    const history = await reviewHistory(ctx, doc);
    const mine = doc.author === ctx.claims.sub;
    const editable = mine && (doc.status === 'draft' || doc.status === 'rejected');
    ctx.show(
        h('h1', {tabindex: '-1'}, doc.title),
        h('p', {class: 'meta'}, statusBadge(doc.status),
          ` by ${doc.author}, version ${doc.version}, updated `, timeEl(doc.updated_at)),
        editable ? submitBlock(ctx, doc) : null,
        editable ? editForm(ctx, doc)
                 : h('section', {'aria-labelledby': 'content-h'},
                     h('h2', {id: 'content-h'}, 'Content'),
                     h('div', {class: 'content'}, doc.content || '')),
        h('section', {'aria-labelledby': 'history-h'},
          h('h2', {id: 'history-h'}, 'Reviews'), history));
}

function submitBlock(ctx, doc) {
    const button = h('button', {type: 'button', class: 'primary'}, 'Submit for review');
    button.addEventListener('click', async () => {
        button.disabled = true;
        try {
            await ctx.api.submit(doc.id);
            ctx.notify('ok', `Submitted “${doc.title}” for review.`, {sticky: true});
            ctx.go(`#/documents/${doc.id}`);
        } catch (err) {
            ctx.notify('error', describeError(err), {focus: true});
            button.disabled = false;
        }
    });
    return h('p', {}, button);
}

function editForm(ctx, doc) {
    const form = h('form', {class: 'card', 'aria-labelledby': 'edit-h'},
                   h('h2', {id: 'edit-h'}, 'Edit'),
                   documentFields(doc),
                   h('button', {type: 'submit'}, 'Save changes'));
    form.addEventListener('submit', async (e) => {
        e.preventDefault();
        try {
            const saved = await ctx.api.updateDocument(doc.id, ...fieldValues(form));
            ctx.notify('ok', `Saved version ${saved.version}.`, {sticky: true});
            ctx.go(`#/documents/${doc.id}`);
        } catch (err) {
            ctx.notify('error', describeError(err), {focus: true});
        }
    });
    return form;
}

// The document's reviews, newest first, as a list element.
async function reviewHistory(ctx, doc) {
    let reviews;
    try {
        reviews = (await ctx.api.documentReviews(doc.id)).items;
    } catch (err) {
        if (!(err instanceof ApiError)) {
            throw err;
        }
        return h('p', {}, `The history could not be read: ${describeError(err)}`);
    }
    if (reviews.length === 0) {
        return h('p', {}, 'Not submitted yet.');
    }
    return h('ol', {class: 'items history', reversed: true},
             reviews.map((r) => h('li', {class: 'item'}, reviewSummary(r))));
}

// One review in words: status, who decided when, fence, comment.
export function reviewSummary(r) {
    const parts = [h('span', {}, `Review #${r.id} of version ${r.document_version}: `),
                   statusBadge(r.status)];
    if (r.status === 'pending') {
        parts.push(h('span', {class: 'meta'}, ' submitted by ', r.submitted_by,
                     ' at ', timeEl(r.created_at)));
    } else {
        parts.push(h('span', {class: 'meta'}, ` by ${r.reviewer} at `,
                     timeEl(r.decided_at), ', ',
                     r.fence ? `lock fence ${r.fence}`
                             : 'no fence (decided while Redis was unavailable)'));
    }
    if (r.comment) {
        parts.push(h('blockquote', {class: 'comment'}, r.comment));
    }
    return parts;
}
