// The state machines of CheckpointGroup and Lockstep (issue 12 item 3): every transition is a
// method that refuses an illegal move with IllegalTransition, and outside code cannot write their
// state (the `@ts-expect-error` lines fail `npm run typecheck` if a field becomes writable again).
// A real fleet (worker processes over gRPC) under a real initialized lockstep; no step is run.
// NOT the capture/restore flows (capture.test.ts, restore tests) that drive these transitions.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IllegalTransition } from '../../coordinator/session/illegal-transition.js';
import { Lockstep } from '../../coordinator/session/lockstep.js';
import { CheckpointRefusal } from '../../coordinator/checkpoint/refusal.js';
import { LIF, logger, startSession, type Session } from './harness.js';

let s: Session;
beforeAll(async () => {
  s = await startSession(LIF(8));
});
afterAll(async () => {
  await s?.close();
});

/** Run `move` and return the IllegalTransition it throws (fails the test if it throws anything else). */
function refusal(move: () => unknown): IllegalTransition {
  try {
    move();
  } catch (e) {
    expect(e).toBeInstanceOf(IllegalTransition);
    return e as IllegalTransition;
  }
  throw new Error('the transition was allowed');
}

describe('CheckpointGroup state machine', () => {
  it('refuses a restore while capturing, and a second capture, then returns to the phase it left', () => {
    const { group } = s;
    expect(group.phase).toBe('ready');
    group.beginCapture();
    expect(group.phase).toBe('capturing');
    const e = refusal(() => group.beginRestore());
    expect(e.message).toBe('checkpoint group: beginRestore() is not allowed in state capturing');
    expect([e.machine, e.transition, e.from]).toEqual(['checkpoint group', 'beginRestore', 'capturing']);
    expect(refusal(() => group.beginCapture()).from).toBe('capturing');
    expect(refusal(() => group.install('e9', 0n, [], {} as never)).transition).toBe('install');
    group.endCapture();
    expect(group.phase).toBe('ready');
    expect(refusal(() => group.endCapture()).from).toBe('ready');
  });

  it('abandons a restore back to ready; a fence taints, fails the lockstep, and refuses a capture', () => {
    const { group } = s;
    group.beginRestore();
    expect(refusal(() => group.beginCapture()).from).toBe('restoring');
    expect(() => group.resume()).toThrow(CheckpointRefusal);
    group.abandonRestore();
    expect(group.phase).toBe('ready');
    expect(refusal(() => group.fence(['environment'])).from).toBe('ready');
    expect(group.tainted.size).toBe(0);

    group.beginRestore();
    group.fence(['environment']);
    expect(group.phase).toBe('fenced');
    expect([...group.tainted]).toEqual(['environment']);
    expect(group.lockstep.state).toBe('failed');
    expect(refusal(() => group.beginCapture()).from).toBe('fenced');
    expect(refusal(() => group.abandonRestore()).from).toBe('fenced');
  });

  it('keeps its state unwritable from outside', () => {
    const { group } = s;
    const writeAll = () => {
      // @ts-expect-error the phase moves only through the transition methods
      group.phase = 'ready';
      // @ts-expect-error tainted participants are added only by fence()
      group.tainted.add('environment');
      // @ts-expect-error the coordinator state is installed only by install()
      group.clocks = new Map();
      // @ts-expect-error the coordinator state is installed only by install()
      group.eventsIssued = 0n;
      // @ts-expect-error the writer is fixed at construction
      group.writer = undefined;
    };
    expect(writeAll).toBeTypeOf('function');
  });
});

describe('Lockstep state machine', () => {
  const fresh = () => new Lockstep(s.plan, s.fleet, { dispatch: 'sequential', epoch: 'e1', startedAt: 0n, logger });

  it('refuses to step before initialization and to adopt identities once past starting', async () => {
    const lockstep = fresh();
    expect(lockstep.state).toBe('starting');
    await expect(lockstep.step()).rejects.toThrow(IllegalTransition);
    lockstep.adoptIdentities(s.lockstep.identities!);
    expect(lockstep.identities).toBe(s.lockstep.identities);
    lockstep.fail();
    expect(lockstep.state).toBe('failed');
    expect(refusal(() => lockstep.adoptIdentities(s.lockstep.identities!)).from).toBe('failed');
    await expect(lockstep.step()).rejects.toThrow('lockstep: step() is not allowed in state failed');
    await expect(lockstep.initialize()).rejects.toThrow(IllegalTransition);
  });

  it('keeps its state unwritable from outside', () => {
    const lockstep = fresh();
    const writeAll = () => {
      // @ts-expect-error the state moves only through initialize/step/installRestored/fail
      lockstep.state = 'failed';
      // @ts-expect-error the boundary moves only with a committed step or an installed restore
      lockstep.boundary = 1n;
      // @ts-expect-error identities come from initialize() or adoptIdentities()
      lockstep.identities = undefined;
    };
    expect(writeAll).toBeTypeOf('function');
  });
});
