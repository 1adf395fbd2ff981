// The thread Link's batching: bodies sent in one synchronous run cross as one port message (one
// wake-up of the worker thread), in order; an attachment flushes what waits before it; nothing is
// posted after close. The worker thread's side reads a batch back (readPortBatch).
import { describe, expect, it } from 'vitest';
import { PortLink, readPortBatch, readPortMessage, type MessagePortLike } from '../../core/protocol/port-link.js';

function fakePort(): { port: MessagePortLike; posted: unknown[] } {
  const posted: unknown[] = [];
  const port: MessagePortLike = {
    postMessage: (value) => void posted.push(value),
    on: () => port,
    off: () => port,
  };
  return { port, posted };
}

const tick = () => new Promise<void>((r) => queueMicrotask(r));

describe('PortLink batching', () => {
  it('posts two bodies sent in one synchronous run as one message, in order', async () => {
    const { port, posted } = fakePort();
    const link = new PortLink('thread:w', port);
    void link.send('{"a":1}');
    void link.send('{"b":2}');
    expect(posted).toHaveLength(0);
    await tick();
    expect(posted).toEqual([{ bodies: ['{"a":1}', '{"b":2}'] }]);
    expect(readPortBatch(posted[0])).toEqual(['{"a":1}', '{"b":2}']);
  });

  it('posts a lone body as a plain message', async () => {
    const { port, posted } = fakePort();
    const link = new PortLink('thread:w', port);
    void link.send(new TextEncoder().encode('{"c":3}'));
    await tick();
    expect(posted).toEqual([{ body: '{"c":3}' }]);
    expect(readPortBatch(posted[0])).toBeUndefined();
    expect(readPortMessage(posted[0])?.body).toBe('{"c":3}');
  });

  it('flushes the waiting bodies before a message with an attachment', async () => {
    const { port, posted } = fakePort();
    const link = new PortLink('thread:w', port);
    void link.send('{"a":1}');
    void link.send('{"b":2}', new Uint8Array([1, 2, 3]));
    await tick();
    expect(posted).toHaveLength(2);
    expect(posted[0]).toEqual({ body: '{"a":1}' });
    expect(readPortMessage(posted[1])?.body).toBe('{"b":2}');
    expect([...readPortMessage(posted[1])!.attachment!]).toEqual([1, 2, 3]);
  });

  it('posts nothing once closed, and refuses sends after', async () => {
    const { port, posted } = fakePort();
    const link = new PortLink('thread:w', port);
    void link.send('{"a":1}');
    link.close();
    await tick();
    expect(posted).toHaveLength(0);
    await expect(link.send('{"b":2}')).rejects.toThrow(/closed/);
  });

  it('reads only a list of texts as a batch', () => {
    expect(readPortBatch({ bodies: ['x', 'y'] })).toEqual(['x', 'y']);
    expect(readPortBatch({ bodies: ['x', 1] })).toBeUndefined();
    expect(readPortBatch({ bodies: 'x' })).toBeUndefined();
    expect(readPortBatch(null)).toBeUndefined();
  });
});
