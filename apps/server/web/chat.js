// The chat view: one question at a time to /v1/chat/completions, streamed, with the user's
// memory in the chosen mode; beside each answer its time to first token, measured here, and
// the facts the server retrieved for it (memory.return_facts).
import {$, apiFetch, currentUser, el, rememberUser} from './common.js';

const FACTS_LABEL = {
    kv: 'Injected facts (KV)',
    prompt: 'Facts in the prompt',
    none: ''
};

// The JSON objects of a server-sent-event stream, as they arrive.
async function* sseEvents(body) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
        const {value, done} = await reader.read();
        if (done) return;
        buffer += value;
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
            const event = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            for (const line of event.split('\n')) {
                if (!line.startsWith('data:')) continue;
                const data = line.slice(5).trim();
                if (data === '[DONE]') return;
                yield JSON.parse(data);
            }
        }
    }
}

function requestBody(question) {
    const mode = $('chat-mode').value;
    const body = {
        model: '',
        messages: [{role: 'user', content: question}],
        stream: true,
        stream_options: {include_usage: true},
        max_tokens: Number($('chat-max-tokens').value) || 64,
        temperature: Number($('chat-temperature').value) || 0,
    };
    const user = currentUser();
    if (user) {
        body.user = user;
        body.memory = {mode, return_facts: true};
        if (mode !== 'none') {
            body.memory.top_k = Number($('chat-k').value);
            body.memory.retrieval = $('chat-retrieval').value;
        }
    }
    return body;
}

function renderFacts(entry, mode, facts) {
    const box = entry.querySelector('.answer-facts');
    box.replaceChildren();
    if (mode === 'none') return;
    box.append(el('h3', facts.length ? FACTS_LABEL[mode] : 'No facts retrieved'));
    const list = el('ul');
    for (const f of facts) {
        const item = el('li');
        item.append(el('span', f.memory), el('span', f.score.toFixed(3), 'score'));
        list.append(item);
    }
    box.append(list);
}

function newEntry(question, mode, user) {
    const entry = el('li', '', 'exchange');
    const q = el('div', '', 'question');
    q.append(el('span', user || '(no user)', 'who'), el('span', question));
    const answer = el('div', '', 'answer');
    answer.append(el('div', '', 'answer-text'), el('div', '', 'answer-facts'));
    const meta = el('div', `${mode} · waiting…`, 'meta');
    entry.append(q, answer, meta);
    $('chat-log').prepend(entry);
    return entry;
}

let modelId = '';

async function servedModel() {
    if (!modelId) {
        const res = await apiFetch('/v1/models');
        modelId = (await res.json()).data[0].id;
    }
    return modelId;
}

async function ask(question) {
    const user = currentUser();
    if (user) rememberUser(user);
    const body = requestBody(question);
    const mode = body.memory ? body.memory.mode : 'none';
    const entry = newEntry(question, mode, user);
    const text = entry.querySelector('.answer-text');
    const meta = entry.querySelector('.meta');
    let ttft = null;
    let usage = null;
    let firstAt = 0;
    try {
        body.model = await servedModel();
        const start = performance.now();
        const res = await apiFetch('/v1/chat/completions', {method: 'POST', body});
        for await (const chunk of sseEvents(res.body)) {
            if (chunk.error) throw new Error(chunk.error.message);
            if (chunk.memory_facts) renderFacts(entry, mode, chunk.memory_facts);
            if (chunk.usage) usage = chunk.usage;
            const delta = chunk.choices?.[0]?.delta?.content;
            if (delta === undefined) continue;
            if (ttft === null) {
                firstAt = performance.now();
                ttft = firstAt - start;
                meta.textContent = `${mode} · TTFT ${ttft.toFixed(0)} ms · streaming…`;
            }
            text.textContent += delta;
        }
        const parts = [mode, `TTFT ${ttft === null ? '–' : ttft.toFixed(0)} ms`];
        if (usage) {
            const seconds = (performance.now() - firstAt) / 1000;
            parts.push(`${usage.completion_tokens} tokens`);
            if (usage.completion_tokens > 1 && seconds > 0)
                parts.push(`${((usage.completion_tokens - 1) / seconds).toFixed(1)} tok/s`);
            const cached = usage.prompt_tokens_details?.cached_tokens;
            if (cached) parts.push(`${cached} prompt tokens cached`);
        }
        meta.textContent = parts.join(' · ');
        entry.classList.add('done');
    } catch (error) {
        meta.textContent = `${mode} · error`;
        entry.querySelector('.answer').append(el('p', error.message, 'error'));
        entry.classList.add('failed');
    }
}

export function initChat() {
    const input = $('chat-input');
    const send = () => {
        const question = input.value.trim();
        if (!question) return;
        input.value = '';
        ask(question);
    };
    $('chat-form').addEventListener('submit', (event) => {
        event.preventDefault();
        send();
    });
    input.addEventListener('keydown', (event) => {
        if (event.key === 'Enter' && !event.shiftKey) {
            event.preventDefault();
            send();
        }
    });
    $('chat-mode').addEventListener('change', () => {
        const off = $('chat-mode').value === 'none';
        $('chat-k').disabled = off;
        $('chat-retrieval').disabled = off;
    });
    return {shown: () => input.focus()};
}
