// The state codec's two value forms msgpackr does not write by itself (docs/spec/state-codec.md):
// the ndarray ext (type 0x6e: u8 dtype length, the numpy typestr, u8 ndim, each dim as u32
// big-endian, then the elements little-endian in C order), which typed arrays other than Uint8Array
// travel as, and the marker that makes -0 a float64. Not the codec itself (state-codec.ts).

/** The msgpack ext type of an n-dimensional array with its element type. */
export const NDARRAY_EXT = 0x6e;

/** Stands in for -0 in a sorted state tree; the codec writes it as float64 -0. */
export class NegativeZero {}

type ArrayClass =
  | typeof Int8Array
  | typeof Uint16Array
  | typeof Int16Array
  | typeof Uint32Array
  | typeof Int32Array
  | typeof Float32Array
  | typeof Float64Array
  | typeof BigInt64Array
  | typeof BigUint64Array;

/** Each typed array (not Uint8Array: that is bytes) and its numpy typestr, one to one. */
const DTYPES: readonly (readonly [ArrayClass, string])[] = [
  [Float64Array, '<f8'],
  [Float32Array, '<f4'],
  [BigInt64Array, '<i8'],
  [Int32Array, '<i4'],
  [Int16Array, '<i2'],
  [Int8Array, '|i1'],
  [BigUint64Array, '<u8'],
  [Uint32Array, '<u4'],
  [Uint16Array, '<u2'],
];

export const ndarrayClasses: readonly ArrayClass[] = DTYPES.map(([c]) => c);

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** The ext data of a 1-dimensional typed array. */
export function encodeNdarray(value: InstanceType<ArrayClass>): Buffer {
  if (!LITTLE_ENDIAN) throw new Error('state: typed arrays are captured on little-endian hosts only');
  const typestr = DTYPES.find(([c]) => value instanceof c)![1];
  const head = Buffer.alloc(2 + typestr.length + 4);
  head[0] = typestr.length;
  head.write(typestr, 1, 'ascii');
  head[1 + typestr.length] = 1;
  head.writeUInt32BE(value.length, 2 + typestr.length);
  return Buffer.concat([head, new Uint8Array(value.buffer, value.byteOffset, value.byteLength)]);
}

/**
 * A typed array of the ext's element type, in memory of its own. A shape of several dimensions
 * (a Python model's) comes back flat, in C order; '|u1' and '|b1' come back as Uint8Array.
 */
export function decodeNdarray(data: Uint8Array): unknown {
  const refuse = (why: string): never => {
    throw new Error(`state payload: an ndarray ext ${why}`);
  };
  const length = data[0] ?? refuse('is empty');
  const typestr = Buffer.from(data.subarray(1, 1 + length)).toString('latin1');
  const Class =
    DTYPES.find(([, t]) => t === typestr)?.[0] ?? (typestr === '|u1' || typestr === '|b1' ? Uint8Array : null);
  if (Class === null) return refuse(`has an unknown dtype ${JSON.stringify(typestr)}`);
  const ndim = data[1 + length] ?? refuse('is truncated');
  const at = 2 + length + 4 * ndim;
  if (data.length < at) refuse('is truncated');
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let count = 1;
  for (let i = 0; i < ndim; i++) count *= view.getUint32(2 + length + 4 * i);
  const body = data.subarray(at);
  if (body.byteLength !== count * Class.BYTES_PER_ELEMENT) refuse('does not hold its shape');
  const own = new Uint8Array(body.byteLength);
  own.set(body);
  return new Class(own.buffer, 0, count);
}
