// Envelope bodies on the wire are RFC 8785 canonical JSON. Reading one on the hot path: the
// native JSON.parse, then a one-pass check that the text received is already canonical
// (isCanonicalText). A text it cannot prove canonical takes the exact path: the canonical writer
// over the parsed value, compared with the text. Any input that is not exactly canonical
// (duplicate keys, whitespace, key order, number forms, unsafe integers, invalid UTF-8, lone
// surrogates) fails, so this is as strict as the formats parser and several times faster on
// small messages. Not a general JSON reader.
import { canonicalize, isCanonicalText, parseStrict } from '../formats/canonical-json.js';
import { DetsimError } from '../formats/errors.js';
import { isReplyValue, type Body, type ReplyValue } from './link.js';

/**
 * An integer literal of 16 or more digits may lie beyond 2^53: canonical JSON prints it back
 * unchanged, but the protocol refuses unsafe integers, so such a body takes the exact path (whose
 * strict parser names them). Digit runs inside strings rarely follow `:`, `,` or `[`.
 */
const MAYBE_UNSAFE_INTEGER = /[:,[]-?[0-9]{16}/;

/** A body's canonical text (a link sends it as text or as its UTF-8 bytes). */
export function encodeBody(value: unknown): string {
  return canonicalize(value);
}

/** A reply as a link that carries only text or bytes sends it: a ReplyValue printed (link.ts). */
export function replyBody(reply: Body | ReplyValue): Body {
  return isReplyValue(reply) ? encodeBody(reply.envelope) : reply;
}

/** A body's text (bytes decoded as UTF-8; text as it is). */
export function bodyText(body: Body): string {
  return typeof body === 'string' ? body : Buffer.from(body.buffer, body.byteOffset, body.length).toString('utf8');
}

/** A body's bytes, for the strict parser and the byte comparison (decodeBody's rare paths only). */
function bodyBytes(body: Body): Buffer {
  return typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body);
}

/**
 * Read a body as text or bytes: the value, or a refusal naming why it is not canonical JSON.
 * `printedHere`: the body was printed by canonicalize in this process and reached us over a
 * channel nobody else writes to (a worker thread's requests from its coordinator, both ways of an
 * inline worker), so its canonical form is not proven again — it cannot fail the proof — and only
 * the unsafe-integer check stays (canonicalize prints such an integer; the protocol refuses it).
 */
export function decodeBody(body: Body, printedHere = false): unknown {
  const text = bodyText(body);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    parseStrict(bodyBytes(body)); // throws the precise reason (syntax, UTF-8, ...)
    throw new DetsimError('struct_invalid_json', 'body is not JSON');
  }
  // The common case, proven on the text itself without printing the value again.
  if ((printedHere || isCanonicalText(text)) && !MAYBE_UNSAFE_INTEGER.test(text)) return value;
  let again: string;
  try {
    again = canonicalize(value);
  } catch (e) {
    parseStrict(bodyBytes(body)); // a lone surrogate or unsafe value: report it the strict parser's way
    throw e;
  }
  // The strict parser runs on this rare path either way: it names duplicate keys, bad UTF-8 and
  // unsafe integers (which print back unchanged, so the comparison alone would pass them).
  const raw = bodyBytes(body);
  parseStrict(raw);
  if (!sameBytes(raw, text, again))
    throw new DetsimError('struct_not_canonical', 'body is not RFC 8785 canonical JSON');
  return value;
}

/**
 * Whether `bytes` (decoded as `text`) are exactly the UTF-8 of the canonical text `again`, compared
 * as strings. Decoding is lossless unless it produced U+FFFD (invalid UTF-8 becomes U+FFFD), so
 * without one, equal strings mean equal bytes; with one, compare the bytes themselves.
 */
function sameBytes(bytes: Buffer, text: string, again: string): boolean {
  if (text !== again) return false;
  return !text.includes('\uFFFD') || bytes.equals(Buffer.from(again, 'utf8'));
}
