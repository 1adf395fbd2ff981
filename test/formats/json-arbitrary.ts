// Test helper: a fast-check arbitrary of JSON values (null, booleans, finite doubles, integers,
// grapheme strings, small arrays and objects with grapheme keys, at most 4 deep) for the
// canonical-JSON property tests. Not a test itself.
import fc from 'fast-check';

const key = fc.string({ unit: 'grapheme', maxLength: 6 });

export const jsonValue: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  json: fc.oneof(
    { depthSize: 'small', maxDepth: 4 },
    fc.constant(null),
    fc.boolean(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.integer(),
    fc.string({ unit: 'grapheme', maxLength: 10 }),
    fc.array(tie('json'), { maxLength: 4 }),
    fc.dictionary(key, tie('json'), { maxKeys: 5 }),
  ),
})).json;
