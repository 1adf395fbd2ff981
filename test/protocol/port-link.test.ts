// The thread Link over a real worker_threads MessageChannel: bodies sent in one turn cross as one
// batch, in order; an attachment is never batched and never overtakes what was sent before it; a
// close still delivers what was sent; and what a port may carry is read strictly.
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { PortLink, readPortMessages } from '../../core/protocol/index.js';

const channels: MessageChannel[] = [];
afterEach(() => {
  for (const c of channels.splice(0)) {
    c.port1.close();
    c.port2.close();
  }
});

/** A link on port1 and every raw value port2 receives, in order. */
function linked(): { link: PortLink; received: unknown[]; settle: () => Promise<void>; peer: MessagePort } {
  const channel = new MessageChannel();
  channels.push(channel);
  const received: unknown[] = [];
  channel.port2.on('message', (v) => received.push(v));
  const link = new PortLink('thread:test', channel.port1);
  link.open({ message: () => undefined, ended: () => undefined });
  const settle = () => new Promise<void>((r) => setTimeout(r, 20));
  return { link, received, settle, peer: channel.port2 };
}

describe('thread link', () => {
  it('bodies sent in one turn cross as one batch, in order; the next turn is a message of its own', async () => {
    const { link, received, settle } = linked();
    void link.send('{"a":1}');
    void link.send(Buffer.from('{"b":2}'));
    await settle();
    void link.send('{"c":3}');
    await settle();
    expect(received).toEqual([{ bodies: ['{"a":1}', '{"b":2}'] }, { body: '{"c":3}' }]);
    expect(received.flatMap((v) => readPortMessages(v)!.map((m) => m.body))).toEqual(['{"a":1}', '{"b":2}', '{"c":3}']);
  });

  it('an attachment is not batched and does not overtake the bodies sent before it; a close delivers what was sent', async () => {
    const { link, received, settle } = linked();
    void link.send('{"a":1}');
    void link.send('{"b":2}', new Uint8Array([1, 2, 3]));
    void link.send('{"c":3}');
    link.close();
    await settle();
    expect(received).toHaveLength(3);
    expect(received[0]).toEqual({ body: '{"a":1}' });
    const withAttachment = readPortMessages(received[1])!;
    expect(withAttachment.map((m) => [m.body, [...(m.attachment ?? [])]])).toEqual([['{"b":2}', [1, 2, 3]]]);
    expect(received[2]).toEqual({ body: '{"c":3}' });
    await expect(link.send('{"d":4}')).rejects.toThrow(/closed/);
  });

  it('reads only {body, attachment?} and non-empty {bodies} of strings', () => {
    expect(readPortMessages({ body: 'x' })).toEqual([{ body: 'x', attachment: undefined }]);
    expect(readPortMessages({ bodies: ['x', 'y'] })!.map((m) => m.body)).toEqual(['x', 'y']);
    for (const bad of [
      null,
      'x',
      {},
      { body: 1 },
      { bodies: [] },
      { bodies: ['x', 2] },
      { bodies: 'x' },
      { bodies: ['x'], body: 'y' },
      { bodies: ['x'], attachment: new Uint8Array(1) },
    ])
      expect(readPortMessages(bad), JSON.stringify(bad)).toBeUndefined();
  });

  it('a batch from the thread side breaks the link as a protocol violation (a thread replies one message at a time)', async () => {
    const channel = new MessageChannel();
    channels.push(channel);
    const ended: string[] = [];
    const link = new PortLink('thread:test', channel.port1);
    link.open({ message: () => undefined, ended: (kind) => ended.push(kind) });
    channel.port2.postMessage({ bodies: ['{"a":1}', '{"b":2}'] });
    await new Promise((r) => setTimeout(r, 20));
    expect(ended).toEqual(['protocol']);
  });
});
