// console/signin.js: the sign-in screen.  A token printed by
// `reviewd token --sub alice --role author` can always be pasted; when
// reviewd runs with DEV_LOGIN=1 (loopback only) the screen also offers
// "sign in as" a chosen user and role, which asks reviewd for a token.
import {describeError} from './api.js';
import {h} from './dom.js';

export async function renderSignIn(ctx) {
    const offered = await ctx.api.devLoginOffered();
    const tokenError = h('p', {id: 'token-error', class: 'field-error', role: 'alert'});
    const tokenInput = h('textarea', {id: 'token', rows: '3', required: true,
                                      autocomplete: 'off', spellcheck: 'false',
                                      'aria-describedby': 'token-help token-error'});
    const tokenForm = h('form', {class: 'card', onsubmit: (e) => {
        e.preventDefault();
        tokenError.textContent = ctx.signIn(tokenInput.value.trim()) || '';
    }},
    h('h2', {}, 'With a token'),
    h('label', {for: 'token'}, 'Token'),
    h('p', {id: 'token-help', class: 'help'},
      'Paste the output of: reviewd token --sub alice --role author'),
    tokenInput, tokenError,
    h('button', {type: 'submit'}, 'Sign in'));

    ctx.show(h('h1', {tabindex: '-1'}, 'Sign in'),
             offered ? devForm(ctx) : null,
             tokenForm);
}

function devForm(ctx) {
    const error = h('p', {id: 'dev-error', class: 'field-error', role: 'alert'});
    const user = h('input', {id: 'dev-user', type: 'text', required: true,
                             autocomplete: 'username', value: 'alice',
                             'aria-describedby': 'dev-error'});
    const role = h('select', {id: 'dev-role'},
                   ['author', 'reviewer', 'admin'].map((r) => h('option', {value: r}, r)));
    return h('form', {class: 'card', onsubmit: async (e) => {
        e.preventDefault();
        try {
            const res = await ctx.api.devToken(user.value.trim(), role.value);
            error.textContent = ctx.signIn(res.token) || '';
        } catch (err) {
            error.textContent = describeError(err);
        }
    }},
    h('h2', {}, 'Development sign-in'),
    h('p', {class: 'help'}, 'reviewd runs with DEV_LOGIN=1: pick any user and role.'),
    h('label', {for: 'dev-user'}, 'User'), user,
    h('label', {for: 'dev-role'}, 'Role'), role,
    h('button', {type: 'submit'}, 'Sign in as this user'));
}
