// What every view shares: the API key, the current user, element helpers, and the one
// function the views call the server with.
export const KEY_STORAGE = 'inferscale.apiKey';
const USERS_STORAGE = 'inferscale.users';

export const $ = (id) => document.getElementById(id);

export function apiKey() {
    return localStorage.getItem(KEY_STORAGE) || '';
}

export function currentUser() {
    return $('user').value.trim();
}

// An element with text content and optional class.
export function el(tag, text = '', className = '') {
    const node = document.createElement(tag);
    if (text !== '') node.textContent = text;
    if (className) node.className = className;
    return node;
}

export class ApiError extends Error {
    constructor(status, message) {
        super(message);
        this.status = status;
    }
}

export function authHeaders() {
    const key = apiKey();
    return key ? {Authorization: `Bearer ${key}`} : {};
}

// A fetch of this server's `path`, with the key; the raw Response (for streams), or an
// ApiError carrying the server's message. A 401 opens the key dialog.
export async function apiFetch(path, {method = 'GET', body} = {}) {
    const headers = authHeaders();
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (res.ok) return res;
    let message = `HTTP ${res.status}`;
    try {
        message = (await res.json()).error.message || message;
    } catch {
        // not an OpenAI error body: keep the status
    }
    if (res.status === 401) openKeyDialog();
    throw new ApiError(res.status, message);
}

export async function api(path, options) {
    return (await apiFetch(path, options)).json();
}

// Remembers `user` among the users this browser has used, for the user picker.
export function rememberUser(user) {
    const users = knownUsers().filter((u) => u !== user);
    users.unshift(user);
    localStorage.setItem(USERS_STORAGE, JSON.stringify(users.slice(0, 20)));
    fillUserList();
}

export function knownUsers() {
    try {
        return JSON.parse(localStorage.getItem(USERS_STORAGE)) || [];
    } catch {
        return [];
    }
}

export function fillUserList() {
    $('known-users').replaceChildren(...knownUsers().map((u) => {
        const option = document.createElement('option');
        option.value = u;
        return option;
    }));
}

export function openKeyDialog() {
    const dialog = $('key-dialog');
    if (dialog.open) return;
    $('key-input').value = apiKey();
    dialog.showModal();
}
