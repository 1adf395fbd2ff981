// The socket wire's reader (core/protocol/socket-wire.ts) on bytes cut every way a socket may cut
// them, and its refusals: a body past the limit, an empty body, an attachment before Hello, an
// oversized attachment (refused, or dropped as it streams by and named). The link and the server
// over a real socket are tested with the client (client.test.ts) and the worker (test/workers/).
import { describe, expect, it } from 'vitest';
import { SOCKET_HEADER_BYTES, SocketReader, type SocketMessage, socketMessageHead } from '../../core/protocol/index.js';

const LIMITS = { maxBodyBytes: 1024, maxAttachmentBytes: 4096 };

/** One message's bytes on the wire. */
function wire(body: string, attachment?: Buffer): Buffer {
  const head = socketMessageHead(body, attachment?.length ?? 0);
  return attachment ? Buffer.concat([head, attachment]) : head;
}

/** Feed `bytes` in pieces of `size` bytes; every message completed, in order. */
function feed(reader: SocketReader, bytes: Buffer, size: number): SocketMessage[] {
  const out: SocketMessage[] = [];
  for (let at = 0; at < bytes.length; at += size) out.push(...reader.push(bytes.subarray(at, at + size)));
  return out;
}

const simple = (m: SocketMessage) => ({
  body: m.body.toString('utf8'),
  attachment: m.attachment?.toString('hex'),
  dropped: m.droppedAttachmentBytes,
});

describe('socket wire', () => {
  const stream = Buffer.concat([wire('{"a":"é"}'), wire('{"b":2}', Buffer.from([1, 2, 3, 250])), wire('{"c":3}')]);
  const expected = [
    { body: '{"a":"é"}', attachment: undefined, dropped: undefined },
    { body: '{"b":2}', attachment: '010203fa', dropped: undefined },
    { body: '{"c":3}', attachment: undefined, dropped: undefined },
  ];

  it('a header is the body and attachment lengths (UTF-8 bytes, big-endian), then the body', () => {
    const head = socketMessageHead('{"a":"é"}', 5);
    expect(head.readUInt32BE(0)).toBe(Buffer.byteLength('{"a":"é"}'));
    expect(head.readUInt32BE(4)).toBe(5);
    expect(head.subarray(SOCKET_HEADER_BYTES).toString('utf8')).toBe('{"a":"é"}');
    expect(socketMessageHead(Buffer.from('{"x":1}'), 0).equals(socketMessageHead('{"x":1}', 0))).toBe(true);
  });

  it('rebuilds the same messages however the bytes are cut', () => {
    for (const size of [1, 2, 3, 7, 8, 9, 16, stream.length]) {
      expect(feed(new SocketReader(LIMITS), stream, size).map(simple), `pieces of ${size}`).toEqual(expected);
    }
  });

  it('refuses a body past the limit, and an empty body, from the header alone', () => {
    const big = Buffer.alloc(SOCKET_HEADER_BYTES);
    big.writeUInt32BE(LIMITS.maxBodyBytes + 1, 0);
    expect(() => new SocketReader(LIMITS).push(big)).toThrow(`a body of 1025 bytes exceeds 1024`);
    expect(() => new SocketReader(LIMITS).push(Buffer.alloc(SOCKET_HEADER_BYTES))).toThrow('a message without a body');
  });

  it('refuses an attachment while attachments may not come yet (before Hello), from the header alone', () => {
    let introduced = false;
    const reader = new SocketReader({ ...LIMITS, mayAttach: () => introduced });
    expect(reader.push(wire('{"hello":1}')).map(simple)).toEqual([
      { body: '{"hello":1}', attachment: undefined, dropped: undefined },
    ]);
    const early = new SocketReader({ ...LIMITS, mayAttach: () => introduced });
    expect(() => early.push(wire('{"x":1}', Buffer.alloc(3)).subarray(0, SOCKET_HEADER_BYTES))).toThrow(
      'an attachment before Worker.Hello on this connection',
    );
    introduced = true;
    expect(reader.push(wire('{"x":1}', Buffer.alloc(3, 9))).map(simple)[0]!.attachment).toBe('090909');
  });

  it('an oversized attachment breaks the framing, or with dropOversized is discarded as it streams and named', () => {
    const huge = Buffer.alloc(LIMITS.maxAttachmentBytes + 1, 7);
    const bytes = Buffer.concat([wire('{"big":1}', huge), wire('{"next":2}', Buffer.from([5]))]);
    expect(() => new SocketReader(LIMITS).push(bytes.subarray(0, SOCKET_HEADER_BYTES))).toThrow(
      'attachment exceeds 4096 bytes',
    );
    const dropping = new SocketReader({ ...LIMITS, dropOversized: true });
    const out = feed(dropping, bytes, 1000);
    expect(out.map(simple)).toEqual([
      { body: '{"big":1}', attachment: undefined, dropped: huge.length },
      { body: '{"next":2}', attachment: '05', dropped: undefined },
    ]);
    // Nothing of the dropped attachment is held while it streams.
    const again = new SocketReader({ ...LIMITS, dropOversized: true });
    expect(again.push(bytes.subarray(0, SOCKET_HEADER_BYTES + 9 + 100))).toEqual([]);
    expect(again.bufferedBytes).toBe(0);
    const kept = new SocketReader({ ...LIMITS, maxAttachmentBytes: huge.length, dropOversized: true });
    expect(kept.push(bytes.subarray(0, SOCKET_HEADER_BYTES + 9 + 100))).toEqual([]);
    expect(kept.bufferedBytes).toBe(9 + 100); // the body and the piece of attachment, waiting for the rest
  });
});
