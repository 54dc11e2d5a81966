/**
 * A long session drawn in pages: "Load earlier turns" draws the page before the first turn drawn
 * (session/history with the cursor), and each turn drawn from the history gets every step's
 * text (run/steps), not only its reply. The requests are ../paging.ts's.
 */

import { messageOf } from '../errors';
import { readPictures } from '../images';
import { earlierPage, stepsOf } from '../paging';
import { nameFollowedPlans } from '../plan';
import { Step, Turn } from '../protocol';
import { fromHistory, turnView, withStepTexts } from '../transcript';
import type { SessionCore } from './core';

export class Paging {
  private loadingEarlier?: Promise<number>;

  constructor(private readonly core: SessionCore) {}

  /** Draw the page of turns before the first one drawn (session/history with the cursor);
   * the number of turns added (0: there were none). */
  loadEarlier(): Promise<number> {
    this.loadingEarlier ??= this.fetchEarlier().finally(() => (this.loadingEarlier = undefined));
    return this.loadingEarlier;
  }

  private async fetchEarlier(): Promise<number> {
    const { core } = this;
    const session = core.session;
    const cursor = core.historyCursor;
    if (!session || !cursor) {
      return 0;
    }
    await core.ensureAttached();
    const page = await earlierPage(core.client, session.sessionId, cursor);
    if (core.session?.sessionId !== session.sessionId || core.historyCursor !== cursor) {
      return 0; // another session, or the history was read again meanwhile
    }
    const known = new Set(core.transcript.map((t) => t.turnId));
    const turns = page.turns.filter((t) => !known.has(t.turnId)).map((t) => fromHistory(t));
    core.transcript.unshift(...turns);
    // a turn that carries out the plan of one of these is named by its prompt now
    nameFollowedPlans(core.transcript);
    const added = new Set(turns.map((t) => t.turnId));
    core.transcript.filter((t) => t.followsPlan && added.has(t.followsPlan.turnId) && !turns.includes(t)).forEach((t) => core.coalescer.mark(t.key));
    core.historyCursor = page.cursor;
    core.coalescer.flush();
    core.view.post({ type: 'prepend', turns: turns.map(turnView), more: !!page.cursor });
    core.log.info(`loaded ${turns.length} earlier turn(s) of session ${session.sessionId}`);
    void this.fillSteps(page.turns);
    return turns.length;
  }

  /** Every step's text (and thought) of turns drawn from the history (their reply is the last
   * step's), and the pictures of the images their prompts carried. */
  async fillSteps(turns: Turn[]): Promise<void> {
    const { core } = this;
    if (!turns.length) {
      return;
    }
    void this.fillPictures(turns);
    const session = core.session;
    let steps: Map<string, Step[]>;
    try {
      steps = await stepsOf(core.client, turns);
    } catch (error) {
      core.log.warn(`could not read the steps of the history: ${messageOf(error)}`);
      return;
    }
    if (core.session !== session) {
      return;
    }
    for (const turn of turns) {
      const shown = core.transcript.find((t) => t.turnId === turn.turnId);
      const found = steps.get(turn.turnId);
      if (shown && found && shown.outcome !== 'running' && withStepTexts(shown, found)) {
        core.postTurn(shown);
      }
    }
  }

  /** The pictures of the images the turns' prompts carried (session/image), drawn as read. */
  private async fillPictures(turns: Turn[]): Promise<void> {
    const { core } = this;
    const session = core.session;
    for (const turn of turns) {
      const shown = core.transcript.find((t) => t.turnId === turn.turnId);
      if (!session || !shown?.images || core.session !== session) {
        continue;
      }
      try {
        if (await readPictures(core.client, session.sessionId, shown.images)) {
          core.postTurn(shown);
        }
      } catch (error) {
        core.log.warn(`could not read the images of turn ${turn.turnId}: ${messageOf(error)}`);
      }
    }
  }
}
