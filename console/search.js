// console/search.js: full-text search over approved documents
// (GET /v1/search), with each hit's snippet.  The query lives in the
// hash (#/search?q=数据) so a search can be linked and the back button
// returns to it.
import {describeError} from './api.js';
import {h} from './dom.js';

export async function renderSearch(ctx, query) {
    const q = new URLSearchParams(query || '').get('q') || '';
    const input = h('input', {id: 'q', type: 'search', value: q, required: true,
                              maxlength: '500'});
    const form = h('form', {class: 'search', role: 'search'},
                   h('label', {for: 'q'}, 'Search approved documents'),
                   h('div', {class: 'row'}, input,
                     h('button', {type: 'submit'}, 'Search')));
    form.addEventListener('submit', (e) => {
        e.preventDefault();
        ctx.go(`#/search?${new URLSearchParams({q: input.value.trim()})}`);
    });
    const results = q.trim() ? await searchResults(ctx, q) : null;
    ctx.show(h('h1', {tabindex: '-1'}, 'Search'), form, results);
}

async function searchResults(ctx, q) {
    let res;
    try {
        res = await ctx.api.search(q);
    } catch (err) {
        return h('p', {role: 'alert'}, describeError(err));
    }
    const count = res.items.length;
    return h('section', {'aria-labelledby': 'results-h'},
             h('h2', {id: 'results-h'},
               count === 0 ? `No approved document matches “${q}”`
                           : `${count} ${count === 1 ? 'document' : 'documents'} for “${q}”`),
             h('ul', {class: 'items'}, res.items.map((item) =>
                 h('li', {class: 'item'},
                   h('a', {href: `#/documents/${item.document_id}`}, item.title),
                   h('p', {class: 'snippet'}, item.snippet)))));
}
