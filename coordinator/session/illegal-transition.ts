// IllegalTransition: the internal error a state machine (Lockstep, CheckpointGroup) throws when
// asked for a transition its current state does not allow. A programming error, never a user
// refusal: callers that can be asked out of turn by a user check first and refuse with a reason code.
// NOT a DetsimError (no reason code, never printed as `detsim: [reason] …`).

export class IllegalTransition extends Error {
  constructor(
    /** The state machine, e.g. 'lockstep' or 'checkpoint group'. */
    readonly machine: string,
    /** The transition method that was refused. */
    readonly transition: string,
    /** The state the machine was in. */
    readonly from: string,
  ) {
    super(`${machine}: ${transition}() is not allowed in state ${from}`);
    this.name = 'IllegalTransition';
  }
}
