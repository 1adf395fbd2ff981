// The types of the plain data a model's capture() returns and its restore() gets back (the SDK's
// StateValue), kept apart from the codec so that the SDK's declarations need no Node types.
// NOT the codec (state-codec.ts).

/** A typed array a model may capture: Uint8Array travels as bytes, the others with their element type. */
export type StateArray =
  | Uint8Array
  | Int8Array
  | Uint16Array
  | Int16Array
  | Uint32Array
  | Int32Array
  | Float32Array
  | Float64Array
  | BigInt64Array
  | BigUint64Array;

/** Plain data a model may return from capture(); it comes back from restore exactly (same types). */
export type StateValue =
  null | boolean | number | bigint | string | StateArray | StateValue[] | { [key: string]: StateValue };
