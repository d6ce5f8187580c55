// Agent loops over the official SDKs (`openai`, `@anthropic-ai/sdk`), for recap proxy's tests.
//
// node clients.mjs BASE_URL [--npm DIR] [--turns N] [--file-chars N] [--manifest FILE]
//                  [--header NAME:VALUE]... [--only NAME,NAME] [--parallel]
//
// BASE_URL is the server's root (http://127.0.0.1:PORT): the openai SDK gets `${BASE}/v1`, the
// Anthropic SDK `${BASE}`. The SDKs are loaded from DIR/node_modules (--npm, else $RECAP_NPM_DIR,
// else the working directory; npm_deps.sh installs them). Each conversation runs --turns turns
// (6) of a real agent loop: a new user message, the reply (a call of the one tool offered,
// read_file, run here: it returns a fixed file content, --file-chars long), the tool result
// sent back, the final text reply; the whole history is resent each request, with the
// assistant's replies as the client received them (verbatim objects when not streamed, rebuilt
// from the events when streamed). `responses-prev-*` instead send only the new items with
// `previous_response_id`. The *-B conversations use another key and begin with exactly the
// same request as their A twin. Every request carries `x-standin-conv: NAME` (and --header's).
// Replies must be what standin.py scripts: a read_file call of hello.txt, then
// "answer N (re: <this turn's user text>)" with N growing. Prints one line per conversation
// and one for the pass-through calls (models, count_tokens); exits 1 on any failure.
// --manifest writes {conversations: [{name, format, stream, key, prev, texts, replies}]} (texts: the
// user messages; replies: tool call ids and "answer N") for check_sessions.py.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const argv = process.argv.slice(2);
const opt = { turns: 6, fileChars: 0, headers: {}, only: null, parallel: false, npm: null, manifest: null };
let base = null;
for (let i = 0; i < argv.length; i++) {
  const a = argv[i], next = () => argv[++i];
  if (a === '--turns') opt.turns = Number(next());
  else if (a === '--file-chars') opt.fileChars = Number(next());
  else if (a === '--manifest') opt.manifest = next();
  else if (a === '--npm') opt.npm = next();
  else if (a === '--only') opt.only = next().split(',');
  else if (a === '--parallel') opt.parallel = true;
  else if (a === '--header') { const h = next(); const k = h.indexOf(':'); opt.headers[h.slice(0, k).trim()] = h.slice(k + 1).trim(); }
  else if (!a.startsWith('--') && !base) base = a.replace(/\/+$/, '');
  else { console.error(`clients.mjs: unknown argument ${a}`); process.exit(2); }
}
if (!base) { console.error('usage: node clients.mjs BASE_URL [--npm DIR] [--turns N] ...'); process.exit(2); }

function loadSdks() {
  const here = path.dirname(fileURLToPath(import.meta.url));
  for (const dir of [opt.npm, process.env.RECAP_NPM_DIR, process.cwd(), here].filter(Boolean)) {
    const req = createRequire(path.join(path.resolve(dir), 'noop.js'));
    try { return { OpenAI: req('openai').OpenAI, Anthropic: req('@anthropic-ai/sdk').Anthropic }; } catch { /* next */ }
  }
  console.error('clients.mjs: cannot load openai and @anthropic-ai/sdk (run npm_deps.sh DIR and pass --npm DIR)');
  process.exit(2);
}
const { OpenAI, Anthropic } = loadSdks();

const MODEL = 'standin-model';
const KEYS = { A: 'sk-test-client-A', B: 'sk-test-client-B' };
const SYSTEM = 'You are a test agent. Use the read_file tool when the user asks about a file.';
const LINE = 'The secret word is PINEAPPLE.\n';
const FILE = opt.fileChars > LINE.length ? LINE.repeat(Math.ceil(opt.fileChars / LINE.length)).slice(0, opt.fileChars) : LINE;
const SCHEMA = { type: 'object', properties: { path: { type: 'string', description: 'the file to read' } },
  required: ['path'], additionalProperties: false };
const DESCRIPTION = 'Read a file of the workspace and return its content.';
const clients = {};
const client = (kind, key) => (clients[kind + key] ??= kind === 'openai'
  ? new OpenAI({ apiKey: KEYS[key], baseURL: `${base}/v1`, maxRetries: 0, timeout: 20000 })
  : new Anthropic({ apiKey: KEYS[key], baseURL: base, maxRetries: 0, timeout: 20000 }));

// ---- one adapter per format: addUser(text), ask() -> {text, calls: [{id, name, args}]}, addResults
function chat(conv) {
  const messages = [{ role: 'system', content: SYSTEM }];
  const tools = [{ type: 'function', function: { name: 'read_file', description: DESCRIPTION, parameters: SCHEMA } }];
  return {
    addUser: (text) => messages.push({ role: 'user', content: text }),
    addResults: (rs) => rs.forEach((r) => messages.push({ role: 'tool', tool_call_id: r.id, content: r.output })),
    async ask() {
      const body = { model: MODEL, messages, tools };
      let msg;
      if (!conv.stream) {
        msg = (await client('openai', conv.key).chat.completions.create(body, conv.opts)).choices[0].message;
      } else {
        const s = await client('openai', conv.key).chat.completions.create(
          { ...body, stream: true, stream_options: { include_usage: true } }, conv.opts);
        let content = '', finish = null;
        const calls = [];
        for await (const chunk of s) {
          const c = chunk.choices[0];
          if (!c) continue;
          content += c.delta.content ?? '';
          for (const tc of c.delta.tool_calls ?? []) {
            const cur = (calls[tc.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
            if (tc.id) cur.id = tc.id;
            cur.function.name += tc.function?.name ?? '';
            cur.function.arguments += tc.function?.arguments ?? '';
          }
          finish = c.finish_reason ?? finish;
        }
        if (!finish) throw new Error('the stream ended without a finish_reason');
        msg = { role: 'assistant', content: content || null, ...(calls.length ? { tool_calls: calls } : {}) };
      }
      messages.push(msg);
      return { text: msg.content ?? '', calls: (msg.tool_calls ?? []).map((c) => ({ id: c.id, name: c.function.name, args: JSON.parse(c.function.arguments) })) };
    },
  };
}

function messages(conv) {
  const history = [];
  const tools = [{ name: 'read_file', description: DESCRIPTION, input_schema: SCHEMA }];
  return {
    addUser: (text) => history.push({ role: 'user', content: text }),
    addResults: (rs) => history.push({ role: 'user', content: rs.map((r) => ({ type: 'tool_result', tool_use_id: r.id, content: r.output })) }),
    async ask() {
      const body = { model: MODEL, max_tokens: 1024, system: SYSTEM, messages: history, tools };
      let content;
      if (!conv.stream) {
        content = (await client('anthropic', conv.key).messages.create(body, conv.opts)).content;
      } else {
        const s = await client('anthropic', conv.key).messages.create({ ...body, stream: true }, conv.opts);
        const blocks = [], json = [];
        let stopped = false;
        for await (const ev of s) {
          if (ev.type === 'content_block_start') { blocks[ev.index] = { ...ev.content_block }; json[ev.index] = ''; }
          else if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') blocks[ev.index].text += ev.delta.text;
          else if (ev.type === 'content_block_delta' && ev.delta.type === 'input_json_delta') json[ev.index] += ev.delta.partial_json;
          else if (ev.type === 'content_block_stop' && blocks[ev.index].type === 'tool_use') blocks[ev.index].input = JSON.parse(json[ev.index] || '{}');
          else if (ev.type === 'message_stop') stopped = true;
        }
        if (!stopped) throw new Error('the stream ended without message_stop');
        content = blocks;
      }
      history.push({ role: 'assistant', content });
      return { text: content.filter((b) => b.type === 'text').map((b) => b.text).join(''),
        calls: content.filter((b) => b.type === 'tool_use').map((b) => ({ id: b.id, name: b.name, args: b.input })) };
    },
  };
}

function responses(conv) {
  let input = [], lastId = null; // with conv.prev, `input` holds only what is new since lastId
  const tools = [{ type: 'function', name: 'read_file', description: DESCRIPTION, parameters: SCHEMA, strict: false }];
  return {
    addUser: (text) => input.push({ role: 'user', content: text }),
    addResults: (rs) => rs.forEach((r) => input.push({ type: 'function_call_output', call_id: r.id, output: r.output })),
    async ask() {
      const body = { model: MODEL, instructions: SYSTEM, input, tools, ...(conv.prev && lastId ? { previous_response_id: lastId } : {}) };
      let output, id;
      if (!conv.stream) {
        const r = await client('openai', conv.key).responses.create(body, conv.opts);
        [output, id] = [r.output, r.id];
      } else {
        const s = await client('openai', conv.key).responses.create({ ...body, stream: true }, conv.opts);
        const items = [];
        for await (const ev of s) {
          if (ev.type === 'response.output_item.done') items[ev.output_index] = ev.item;
          else if (ev.type === 'response.completed') id = ev.response.id;
          else if (ev.type === 'response.failed' || ev.type === 'error') throw new Error(`stream event ${ev.type}: ${JSON.stringify(ev).slice(0, 300)}`);
        }
        if (!id) throw new Error('the stream ended without response.completed');
        output = items;
      }
      lastId = id;
      input = conv.prev ? [] : input.concat(output);
      return { text: output.filter((o) => o.type === 'message').flatMap((o) => o.content).filter((c) => c.type === 'output_text').map((c) => c.text).join(''),
        calls: output.filter((o) => o.type === 'function_call').map((o) => ({ id: o.call_id, name: o.name, args: JSON.parse(o.arguments) })) };
    },
  };
}

const ADAPTERS = { chat, messages, responses };
const CONVS = [];
for (const format of ['chat', 'messages', 'responses']) {
  for (const stream of [false, true]) CONVS.push({ name: `${format}-${stream ? 'stream' : 'json'}-A`, format, stream, key: 'A' });
}
CONVS.push({ name: 'responses-prev-json-A', format: 'responses', stream: false, key: 'A', prev: true });
CONVS.push({ name: 'responses-prev-stream-A', format: 'responses', stream: true, key: 'A', prev: true });
CONVS.push({ name: 'chat-json-B', format: 'chat', stream: false, key: 'B', twin: 'chat-json-A' });
CONVS.push({ name: 'messages-stream-B', format: 'messages', stream: true, key: 'B', twin: 'messages-stream-A' });

const userText = (conv, t) => `[${t === 1 && conv.twin ? conv.twin : conv.name} turn ${t}] please read hello.txt and tell me what it says (take ${t})`;

async function converse(conv) {
  conv.opts = { headers: { ...opt.headers, 'x-standin-conv': conv.name } };
  const a = ADAPTERS[conv.format](conv);
  let requests = 0, last = 0;
  conv.texts = [];
  conv.replies = []; // the tool call ids and "answer N" of the replies, to find them in sessions
  for (let t = 1; t <= opt.turns; t++) {
    const text = userText(conv, t);
    conv.texts.push(text);
    a.addUser(text);
    const r1 = await a.ask(); requests++;
    const c = r1.calls[0];
    if (r1.calls.length !== 1 || c.name !== 'read_file' || c.args?.path !== 'hello.txt') {
      throw new Error(`turn ${t}: expected one read_file call of hello.txt, got ${JSON.stringify(r1).slice(0, 300)}`);
    }
    conv.replies.push(c.id);
    a.addResults([{ id: c.id, output: FILE }]);
    const r2 = await a.ask(); requests++;
    const m = /^answer (\d+) \(re: (.*)\)$/s.exec(r2.text);
    if (r2.calls.length || !m) throw new Error(`turn ${t}: expected "answer N (re: ...)", got ${JSON.stringify(r2).slice(0, 300)}`);
    if (m[2] !== text.slice(0, 80)) throw new Error(`turn ${t}: the reply answers ${JSON.stringify(m[2])}, not this turn's ${JSON.stringify(text.slice(0, 80))}`);
    if (Number(m[1]) <= last) throw new Error(`turn ${t}: answer ${m[1]} after answer ${last} (a replayed reply?)`);
    last = Number(m[1]);
    conv.replies.push(`answer ${last}`);
  }
  return `${opt.turns} turns, ${requests} requests, last reply "answer ${last}"`;
}

async function passthrough() {
  const oa = client('openai', 'A'), an = client('anthropic', 'A');
  const o = (await oa.models.list()).data.map((m) => m.id);
  const n = (await an.models.list()).data.map((m) => m.id);
  const t = await an.messages.countTokens({ model: MODEL, messages: [{ role: 'user', content: 'count me' }] }, { headers: opt.headers });
  if (!o.length || !n.length || !(t.input_tokens > 0)) throw new Error(`unexpected: ${JSON.stringify({ o, n, t })}`);
  return `openai models ${o.join(',')}; anthropic models ${n.join(',')}; count_tokens ${t.input_tokens}`;
}

const run = async (name, f) => {
  try { console.log(`ok   ${name.padEnd(24)} ${await f()}`); return true; }
  catch (e) { console.log(`FAIL ${name.padEnd(24)} ${e.constructor.name}${e.status ? ' ' + e.status : ''}: ${String(e.message).slice(0, 400)}`); return false; }
};
const chosen = CONVS.filter((c) => !opt.only || opt.only.includes(c.name));
const jobs = [...chosen.map((c) => [c.name, () => converse(c)]), ...(opt.only && !opt.only.includes('passthrough') ? [] : [['passthrough', passthrough]])];
const results = opt.parallel ? await Promise.all(jobs.map(([n, f]) => run(n, f)))
  : await jobs.reduce(async (acc, [n, f]) => [...(await acc), await run(n, f)], Promise.resolve([]));
if (opt.manifest) {
  fs.writeFileSync(opt.manifest, JSON.stringify({ conversations: chosen.map((c) => ({ name: c.name, format: c.format, stream: c.stream, key: c.key, prev: !!c.prev, texts: c.texts ?? [], replies: c.replies ?? [] })) }, null, 1));
}
const failed = results.filter((r) => !r).length;
console.log(failed ? `clients: ${failed} of ${results.length} FAILED` : `clients: all ${results.length} passed`);
process.exit(failed ? 1 : 0);
