// node test.mjs PORT  -- exercises openai and @anthropic-ai/sdk against the stand-in
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
const P = process.argv[2];
const out = (label, v) => console.log(label.padEnd(34), JSON.stringify(v).slice(0, 200));
const tryit = async (label, f) => { try { out(label, await f()); } catch (e) { out(label + ' ERROR', `${e.constructor.name}: ${e.status ?? ''} ${e.message}`.slice(0, 200)); } };

const oa = new OpenAI({ apiKey: 'sk-test-123', baseURL: `http://127.0.0.1:${P}/v1`, maxRetries: 0, timeout: 10000 });
const msgs = [{ role: 'user', content: 'say hi' }];
await tryit('openai chat json', async () => (await oa.chat.completions.create({ model: 'm', messages: msgs })).choices[0].message);
await tryit('openai chat stream', async () => { let t = ''; const s = await oa.chat.completions.create({ model: 'm', messages: msgs, stream: true, stream_options: { include_usage: true } }); for await (const c of s) t += c.choices[0]?.delta?.content ?? ''; return t; });
await tryit('openai chat stream helper', async () => (await oa.chat.completions.stream({ model: 'm', messages: msgs }).finalChatCompletion()).choices[0].message);
await tryit('openai responses json', async () => (await oa.responses.create({ model: 'm', input: 'say hi' })).output_text);
await tryit('openai responses stream', async () => { const ev = []; const s = await oa.responses.create({ model: 'm', input: 'say hi', stream: true }); for await (const e of s) ev.push(e.type); return ev; });
await tryit('openai responses stream helper', async () => (await oa.responses.stream({ model: 'm', input: 'say hi' }).finalResponse()).output_text);
await tryit('openai models.list', async () => (await oa.models.list()).data.map(m => m.id));
const oa2 = new OpenAI({ apiKey: 'sk-test-123', baseURL: `http://127.0.0.1:${P}`, maxRetries: 0 });
await tryit('openai baseURL w/o /v1 (chat)', async () => (await oa2.chat.completions.create({ model: 'm', messages: msgs })).choices[0].message.content);

const an = new Anthropic({ apiKey: 'sk-test-123', baseURL: `http://127.0.0.1:${P}`, maxRetries: 0, timeout: 10000 });
await tryit('anthropic messages json', async () => (await an.messages.create({ model: 'm', max_tokens: 100, messages: msgs })).content);
await tryit('anthropic messages stream:true', async () => { const ev = []; const s = await an.messages.create({ model: 'm', max_tokens: 100, messages: msgs, stream: true }); for await (const e of s) ev.push(e.type); return ev; });
await tryit('anthropic messages.stream helper', async () => (await an.messages.stream({ model: 'm', max_tokens: 100, messages: msgs }).finalMessage()).content);
await tryit('anthropic countTokens', async () => await an.messages.countTokens({ model: 'm', messages: msgs }));
await tryit('anthropic models.list', async () => (await an.models.list()).data.map(m => m.id));
await tryit('anthropic beta.messages (beta hdr)', async () => (await an.beta.messages.create({ model: 'm', max_tokens: 100, messages: msgs, betas: ['foo-2025-01-01'] })).content);
const an2 = new Anthropic({ apiKey: 'sk-test-123', baseURL: `http://127.0.0.1:${P}/v1`, maxRetries: 0 });
await tryit('anthropic baseURL with /v1', async () => (await an2.messages.create({ model: 'm', max_tokens: 100, messages: msgs })).content);
