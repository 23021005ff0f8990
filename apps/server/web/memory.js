// The memory view: the current user's facts through the Mem0-style routes (list, search, add,
// edit, delete, history), and a conversation imported for fact extraction, polled until its
// event ends.
import {$, api, currentUser, el, rememberUser} from './common.js';

const POLL_MS = 1000;

function status(id, text, isError = false) {
    const node = $(id);
    node.textContent = text;
    node.classList.toggle('error', isError);
}

// The user the view acts for, or null with a note saying one is needed.
function requireUser(statusId) {
    const user = currentUser();
    if (!user)
        status(statusId, 'Type a user first.', true);
    else
        rememberUser(user);
    return user || null;
}

function shortTime(iso) {
    return iso ? iso.replace('T', ' ').replace(/\.\d+/, '').replace(/[+-]00:00$|Z$/, '') : '';
}

function factItem(fact, {highlight = false} = {}) {
    const item = el('li', '', highlight ? 'fact new' : 'fact');
    item.dataset.id = fact.id;
    const text = el('span', fact.memory, 'fact-text');
    const meta =
        el('span', `#${fact.id} · ${shortTime(fact.updated_at || fact.created_at)}`, 'muted');
    if (fact.score !== undefined) meta.textContent += ` · score ${fact.score.toFixed(3)}`;
    const actions = el('span', '', 'actions');
    const button = (label, action) => {
        const b = el('button', label);
        b.type = 'button';
        b.className = `fact-${label.toLowerCase()}`;
        b.addEventListener('click', action);
        return b;
    };
    actions.append(
        button('Edit', () => editFact(item, fact)),
        button('History', () => showHistory(fact.id)),
        button('Delete', () => deleteFact(fact)),
    );
    item.append(text, meta, actions);
    return item;
}

function showFacts(facts, note, highlightIds = new Set()) {
    $('memory-facts')
        .replaceChildren(...facts.map((f) => factItem(f, {highlight: highlightIds.has(f.id)})));
    status('memory-status', note);
}

export async function listFacts(highlightIds) {
    const user = requireUser('memory-status');
    if (!user) return;
    try {
        const {results} = await api(`/memories?user_id=${encodeURIComponent(user)}`);
        showFacts(
            results, `${results.length} fact${results.length === 1 ? '' : 's'} of ${user}`,
            highlightIds);
    } catch (error) {
        $('memory-facts').replaceChildren();
        status('memory-status', error.message, true);
    }
}

async function searchFacts() {
    const user = requireUser('memory-status');
    const query = $('memory-query').value.trim();
    if (!user) return;
    if (!query) return listFacts();
    const body = {user_id: user, query, top_k: 10};
    if ($('memory-retrieval').value) body.retrieval = $('memory-retrieval').value;
    try {
        const {results} = await api('/search', {method: 'POST', body});
        showFacts(
            results, `${results.length} match${results.length === 1 ? '' : 'es'} for “${query}”`);
    } catch (error) {
        status('memory-status', error.message, true);
    }
}

async function addFact() {
    const user = requireUser('memory-status');
    const text = $('memory-add-text').value.trim();
    if (!user || !text) return;
    try {
        await api('/v1/memories', {method: 'POST', body: {user_id: user, facts: [text]}});
        $('memory-add-text').value = '';
        await listFacts();
    } catch (error) {
        status('memory-status', error.message, true);
    }
}

function editFact(item, fact) {
    const input = el('input');
    input.value = fact.memory;
    input.className = 'fact-edit';
    const save = el('button', 'Save');
    save.className = 'fact-save';
    const cancel = el('button', 'Cancel');
    const form = el('form', '', 'edit');
    form.append(input, save, cancel);
    cancel.type = 'button';
    cancel.addEventListener('click', () => listFacts());
    form.addEventListener('submit', async (event) => {
        event.preventDefault();
        try {
            await api(`/memories/${fact.id}`, {method: 'PUT', body: {text: input.value.trim()}});
            await listFacts();
            await showHistory(fact.id);
        } catch (error) {
            status('memory-status', error.message, true);
        }
    });
    item.querySelector('.fact-text').replaceWith(form);
    input.focus();
}

async function deleteFact(fact) {
    if (!confirm(`Delete “${fact.memory}”?`)) return;
    try {
        await api(`/memories/${fact.id}`, {method: 'DELETE'});
        await listFacts();
    } catch (error) {
        status('memory-status', error.message, true);
    }
}

async function showHistory(id) {
    const list = $('memory-history');
    try {
        const rows = await api(`/memories/${id}/history`);
        list.replaceChildren(...rows.map((row) => {
            const item = el('li', '', `event-${row.event.toLowerCase()}`);
            item.append(
                el('strong', row.event), el('span', ` ${shortTime(row.created_at)} `, 'muted'));
            if (row.old_memory !== null) item.append(el('del', row.old_memory));
            if (row.new_memory !== null) item.append(el('ins', row.new_memory));
            return item;
        }));
    } catch (error) {
        list.replaceChildren(el('li', error.message, 'error'));
    }
}

// "role: text" lines (a line without a role continues the previous message).
function parseConversation(text) {
    const messages = [];
    for (const line of text.split('\n')) {
        const match = line.match(/^\s*(user|assistant|system)\s*:\s*(.*)$/i);
        if (match)
            messages.push({role: match[1].toLowerCase(), content: match[2]});
        else if (line.trim() && messages.length)
            messages.at(-1).content += `\n${line}`;
        else if (line.trim())
            messages.push({role: 'user', content: line});
    }
    return messages;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function importConversation() {
    const user = requireUser('import-status');
    const messages = parseConversation($('import-text').value);
    if (!user) return;
    if (!messages.length) return status('import-status', 'Write a conversation first.', true);
    $('import-send').disabled = true;
    $('import-results').replaceChildren();
    try {
        const queued = await api('/v1/memories', {
            method: 'POST',
            body: {user_id: user, messages, async_mode: true},
        });
        const started = performance.now();
        for (;;) {
            const event = await api(`/v1/memories/events/${queued.event_id}`);
            const seconds = ((performance.now() - started) / 1000).toFixed(0);
            status(
                'import-status', `Extraction ${event.status.toLowerCase()} (${seconds} s)`,
                event.status === 'FAILED');
            if (event.status === 'SUCCEEDED') {
                const results = event.results || [];
                $('import-results')
                    .replaceChildren(
                        ...results.map((r) => el('li', `${r.event} ${r.memory}`, 'fact new')));
                if (!results.length) status('import-status', 'Extraction succeeded: no new facts.');
                await listFacts(new Set(results.map((r) => r.id)));
                break;
            }
            if (event.status === 'FAILED') {
                status('import-status', `Extraction failed: ${event.error}`, true);
                break;
            }
            await sleep(POLL_MS);
        }
    } catch (error) {
        status('import-status', error.message, true);
    } finally {
        $('import-send').disabled = false;
    }
}

function onSubmit(id, action) {
    $(id).addEventListener('submit', (event) => {
        event.preventDefault();
        action();
    });
}

export function initMemory() {
    onSubmit('memory-add-form', addFact);
    onSubmit('memory-search-form', searchFacts);
    onSubmit('import-form', importConversation);
    $('memory-list').addEventListener('click', () => {
        $('memory-query').value = '';
        listFacts();
    });
    return {
        shown: () => {
            if (currentUser()) listFacts();
        },
    };
}
