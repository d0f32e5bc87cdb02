// console/dom.js: the one way the console builds its page.
//
// Everything a user or the server wrote (titles, content, comments,
// names, error details) reaches the page as a text node: h() turns every
// string child into document.createTextNode and sets attributes one by
// one, so markup in data is shown, never parsed.  Nothing in the console
// assigns innerHTML, outerHTML or insertAdjacentHTML, and the
// Content-Security-Policy reviewd sends forbids inline script besides.

// Creates an element.  attrs: {class, for, href, ...} set as attributes,
// except keys starting with "on" (listeners) and a few DOM properties
// (value, checked, disabled, hidden, textContent).  children: nodes,
// strings (as text) or null/false (skipped), nested arrays flattened.
export function h(tag, attrs = {}, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
        if (value === undefined || value === null || value === false) {
            continue;
        }
        if (key.startsWith('on')) {
            el.addEventListener(key.slice(2).toLowerCase(), value);
        } else if (PROPERTIES.has(key)) {
            el[key] = value;
        } else {
            el.setAttribute(key, value === true ? '' : String(value));
        }
    }
    append(el, children);
    return el;
}

const PROPERTIES = new Set(['value', 'checked', 'disabled', 'hidden',
                            'textContent']);

function append(el, children) {
    for (const child of children) {
        if (child === null || child === undefined || child === false) {
            continue;
        }
        if (Array.isArray(child)) {
            append(el, child);
        } else if (child instanceof Node) {
            el.appendChild(child);
        } else {
            el.appendChild(document.createTextNode(String(child)));
        }
    }
}

// Replaces el's children with the given ones (same rules as h()).
export function replace(el, ...children) {
    el.replaceChildren();
    append(el, children);
    return el;
}

// Formats an RFC 3339 timestamp as local "14:02" when it is today,
// else "2026-12-02 14:02"; "" for null.
export function formatTime(iso) {
    if (!iso) {
        return '';
    }
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) {
        return iso;
    }
    const pad = (n) => String(n).padStart(2, '0');
    const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
    const now = new Date();
    if (d.toDateString() === now.toDateString()) {
        return hm;
    }
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${hm}`;
}

// A <time> element showing formatTime(iso), the exact value as datetime.
export function timeEl(iso) {
    return h('time', {datetime: iso}, formatTime(iso));
}
