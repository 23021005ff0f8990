// The page's shell: the key dialog, the tabs, and the three views.
import {initChat} from './chat.js';
import {$, api, apiKey, fillUserList, KEY_STORAGE, knownUsers, openKeyDialog} from './common.js';
import {initMemory} from './memory.js';
import {initServer} from './server.js';

function initKey() {
    $('key-button').addEventListener('click', openKeyDialog);
    $('key-clear').addEventListener('click', () => {
        localStorage.removeItem(KEY_STORAGE);
        $('key-dialog').close('clear');
        updateKeyButton();
    });
    $('key-dialog').addEventListener('close', () => {
        if ($('key-dialog').returnValue !== 'save') return;
        localStorage.setItem(KEY_STORAGE, $('key-input').value.trim());
        updateKeyButton();
        const active = document.querySelector('.tab.active');
        if (active) show(active.dataset.view);  // what the view shows may change with the key
    });
    updateKeyButton();
}

function updateKeyButton() {
    $('key-button').textContent = apiKey() ? 'API key ✓' : 'API key';
}

const views = {};

function show(name) {
    for (const tab of document.querySelectorAll('.tab')) {
        const active = tab.dataset.view === name;
        tab.classList.toggle('active', active);
        $(`view-${tab.dataset.view}`).hidden = !active;
    }
    views[name]?.shown?.();
    history.replaceState(null, '', `#${name}`);
}

function init() {
    initKey();
    fillUserList();
    $('user').value = knownUsers()[0] || '';
    views.chat = initChat();
    views.memory = initMemory();
    views.server = initServer();
    for (const tab of document.querySelectorAll('.tab'))
        tab.addEventListener('click', () => show(tab.dataset.view));
    const requested = location.hash.slice(1);
    show(requested in views ? requested : 'chat');
    checkKey();
}

// Asks for a key at once when the server wants one (a 401 opens the dialog).
function checkKey() {
    api('/v1/models').catch(() => {});
}

init();
