// The chat view's script. It draws what the extension posts (HTML the extension made from
// Markdown, with raw HTML escaped) and posts the user's input back. It loads nothing.
// @ts-check
(function () {
  // @ts-ignore acquireVsCodeApi is given to webviews by VS Code
  const vscode = acquireVsCodeApi();
  const byId = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));
  const turns = byId('turns');
  const prompt = /** @type {HTMLTextAreaElement} */ (byId('prompt'));
  const send = /** @type {HTMLButtonElement} */ (byId('send'));
  const cancel = /** @type {HTMLButtonElement} */ (byId('cancel'));
  const queueSend = /** @type {HTMLButtonElement} */ (byId('queue-send'));
  const queue = byId('queue');
  const queueList = byId('queue-list');
  const empty = byId('empty');
  const header = byId('session-header');
  const notice = byId('notice');
  const earlier = /** @type {HTMLButtonElement} */ (byId('earlier'));
  const images = byId('images');
  const effort = /** @type {HTMLSelectElement} */ (byId('effort'));
  const commandList = byId('command-list');
  let noticeTimer = 0;

  const state = vscode.getState() || {};
  if (state.draft) {
    prompt.value = state.draft;
  }

  function nearBottom() {
    const el = document.scrollingElement || document.documentElement;
    return el.scrollHeight - el.scrollTop - el.clientHeight < 80;
  }

  function toBottom() {
    const el = document.scrollingElement || document.documentElement;
    el.scrollTop = el.scrollHeight;
  }

  /** Child sessions the user folded (false) or unfolded (true), by session id. @type {Map<string, boolean>} */
  const childFolds = new Map();
  /** Thoughts the user unfolded (true) or folded again (false), by their data-fold. @type {Map<string, boolean>} */
  const folds = new Map();

  /** @param {{key: string, turnId?: string, prompt: string, body: string, footer: string, outcome: string}} view @param {Element | null} [before] */
  function drawTurn(view, before) {
    const stick = !before && nearBottom();
    let el = /** @type {HTMLElement | null} */ (turns.querySelector(`section[data-key="${CSS.escape(view.key)}"]`));
    if (!el) {
      el = document.createElement('section');
      el.className = 'turn';
      el.dataset.key = view.key;
      el.innerHTML = '<div class="prompt"></div><div class="reply"></div><div class="footer"></div>';
      turns.insertBefore(el, before ?? null);
    }
    if (view.turnId) {
      el.dataset.turnId = view.turnId;
    }
    el.dataset.outcome = view.outcome;
    /** @type {HTMLElement} */ (el.querySelector('.prompt')).innerHTML = view.prompt;
    const reply = /** @type {HTMLElement} */ (el.querySelector('.reply'));
    reply.innerHTML = view.body;
    // a child session the user folded or unfolded stays so as it streams on and ends
    for (const child of reply.querySelectorAll('details[data-child-session]')) {
      const open = childFolds.get(/** @type {HTMLElement} */ (child).dataset.childSession || '');
      if (open !== undefined) {
        /** @type {HTMLDetailsElement} */ (child).open = open;
      }
    }
    // a thought the user unfolded stays so as the turn streams on
    for (const fold of reply.querySelectorAll('details[data-fold]')) {
      const open = folds.get(/** @type {HTMLElement} */ (fold).dataset.fold || '');
      if (open !== undefined) {
        /** @type {HTMLDetailsElement} */ (fold).open = open;
      }
    }
    /** @type {HTMLElement} */ (el.querySelector('.footer')).innerHTML = view.footer;
    if (stick) {
      toBottom();
    }
  }

  /** @param {boolean} value */
  function setRunning(value) {
    document.body.classList.toggle('running', value);
    send.textContent = value ? 'Steer' : 'Send';
    cancel.hidden = !value;
    queueSend.hidden = !value;
    prompt.placeholder = value
      ? 'Steer the running turn: it reaches the model at its next step'
      : 'Ask about this folder (Enter sends, Shift+Enter starts a new line, / runs a custom command)';
  }

  /** @param {{sessionId: string, title: string, root: string, lineage?: string, worktree?: string, walls?: string, wallsDetail?: string, mode?: string, modeDetail?: string} | null} session */
  function setSession(session) {
    empty.hidden = !!session;
    header.hidden = !session;
    document.body.classList.toggle('has-session', !!session);
    byId('session-title').textContent = session ? session.title || 'New session' : '';
    byId('session-root').textContent = session ? session.root : '';
    const lineage = byId('session-lineage');
    lineage.textContent = session?.lineage ?? '';
    lineage.hidden = !session?.lineage;
    const worktree = byId('session-worktree');
    worktree.textContent = session?.worktree ?? '';
    worktree.hidden = !session?.worktree;
    const walls = byId('session-walls');
    walls.textContent = session?.walls ?? '';
    walls.title = session?.wallsDetail ?? '';
    walls.hidden = !session?.walls;
    walls.classList.toggle('walls-off', !!session?.walls?.startsWith('walls: off'));
    const mode = byId('session-mode');
    mode.textContent = session?.mode ?? '';
    mode.title = session?.modeDetail ? `${session.modeDetail} (click to set another mode)` : '';
    mode.hidden = !session?.mode;
    mode.classList.toggle('mode-plan', session?.mode === 'mode: plan');
  }

  /** @param {'info' | 'error'} level @param {string} text */
  function showNotice(level, text) {
    notice.textContent = text;
    notice.className = `notice-${level}`;
    notice.hidden = false;
    clearTimeout(noticeTimer);
    noticeTimer = setTimeout(() => (notice.hidden = true), 8000);
  }

  /** A row of a list: its text, and a button that posts `message`.
   * @param {{text: string, textClass: string, button: string, buttonClass: string, title: string, message: object}} row */
  function listRow(row) {
    const item = document.createElement('li');
    const text = document.createElement('span');
    text.className = row.textClass;
    text.textContent = row.text;
    const button = document.createElement('button');
    button.type = 'button';
    button.className = `secondary ${row.buttonClass}`;
    button.textContent = row.button;
    button.title = row.title;
    button.addEventListener('click', () => vscode.postMessage(row.message));
    item.append(text, button);
    return item;
  }

  /** @param {{queueId: string, prompt: string}[]} queued */
  function drawQueue(queued) {
    queueList.textContent = '';
    for (const entry of queued) {
      const item = listRow({
        text: entry.prompt,
        textClass: 'queued-prompt',
        button: 'Drop',
        buttonClass: 'drop',
        title: 'Drop it from the queue: it never runs',
        message: { type: 'unqueue', queueId: entry.queueId },
      });
      item.dataset.queueId = entry.queueId;
      queueList.appendChild(item);
    }
    queue.hidden = queued.length === 0;
  }

  /** The images that go with the next prompt, a chip each with a remove button.
   * @param {{id: string, text: string}[]} list */
  function drawImages(list) {
    images.textContent = '';
    for (const image of list) {
      const chip = listRow({
        text: image.text,
        textClass: 'image-text',
        button: '×',
        buttonClass: 'remove-image',
        title: 'Remove it: it does not go with the prompt',
        message: { type: 'dropImage', id: image.id },
      });
      chip.className = 'image-chip';
      chip.dataset.imageId = image.id;
      images.appendChild(chip);
    }
    images.hidden = list.length === 0;
  }

  /** @param {string | null} text */
  function setSpend(text) {
    const spend = byId('session-spend');
    spend.textContent = text ?? '';
    spend.hidden = !text;
  }

  function submit(type = 'send') {
    const text = prompt.value.trim();
    if (!text) {
      return;
    }
    vscode.postMessage({ type, text });
    prompt.value = '';
    vscode.setState({ draft: '' });
    closeCommands();
  }

  // `/` typed first in the prompt box offers the session's custom commands (session/commands,
  // read again at each new `/`, as the daemon reads their files): name, argument hint, source
  // and description. Up and Down choose, Tab or Enter puts `/name ` in the box for its
  // arguments, Escape closes the list; a prompt `/name args` runs the command.
  /** @typedef {{name: string, hint: string, description: string, source: string}} CommandEntry */
  /** The session's commands as last read; null: not read since the session changed. @type {CommandEntry[] | null} */
  let commands = null;
  let commandsError = '';
  let commandsAsked = false;
  let activeCommand = 0;
  /** The commands the list shows now. @type {CommandEntry[]} */
  let shownCommands = [];

  /** The name being typed: the box holds `/` and a name's letters only; undefined otherwise. */
  function typedName() {
    const match = /^\/([a-z0-9_-]*)$/.exec(prompt.value);
    return match ? match[1] : undefined;
  }

  function askCommands() {
    if (!commandsAsked) {
      commandsAsked = true;
      vscode.postMessage({ type: 'commands' });
    }
  }

  function closeCommands() {
    commandList.hidden = true;
    commandList.textContent = '';
    shownCommands = [];
    prompt.removeAttribute('aria-activedescendant');
  }

  /** @param {string} className @param {string} text */
  function span(className, text) {
    const el = document.createElement('span');
    el.className = className;
    el.textContent = text;
    return el;
  }

  function drawCommands() {
    const name = typedName();
    if (name === undefined || commands === null) {
      closeCommands();
      return;
    }
    commandList.textContent = '';
    if (commands.length === 0) {
      shownCommands = [];
      const none = document.createElement('li');
      none.className = 'command-none';
      none.textContent =
        commandsError ||
        "No custom command in this session: a <name>.md file in the project's .trellisd/commands/, or in the commands folder beside your config.toml, is one.";
      commandList.appendChild(none);
      commandList.hidden = false;
      return;
    }
    shownCommands = commands.filter((c) => c.name.startsWith(name));
    if (shownCommands.length === 0) {
      closeCommands();
      return;
    }
    activeCommand = Math.min(activeCommand, shownCommands.length - 1);
    shownCommands.forEach((c, i) => {
      const item = document.createElement('li');
      item.id = `command-${i}`;
      item.className = 'command';
      item.dataset.command = c.name;
      item.setAttribute('role', 'option');
      item.setAttribute('aria-selected', String(i === activeCommand));
      item.append(span('command-name', `/${c.name}`), span('command-hint', c.hint), span('command-source', c.source));
      if (c.description) {
        item.append(span('command-description', c.description));
      }
      // mousedown, not click: the box keeps the focus
      item.addEventListener('mousedown', (event) => {
        event.preventDefault();
        takeCommand(c);
      });
      commandList.appendChild(item);
    });
    prompt.setAttribute('aria-activedescendant', `command-${activeCommand}`);
    commandList.hidden = false;
    commandList.children[activeCommand]?.scrollIntoView({ block: 'nearest' });
  }

  /** @param {CommandEntry} c */
  function takeCommand(c) {
    prompt.value = `/${c.name} `;
    prompt.setSelectionRange(prompt.value.length, prompt.value.length);
    vscode.setState({ draft: prompt.value });
    closeCommands();
    prompt.focus();
  }

  /** A key the list takes while it shows; true when it took it. @param {KeyboardEvent} event */
  function commandKey(event) {
    if (commandList.hidden || event.isComposing) {
      return false;
    }
    if (event.key === 'Escape') {
      closeCommands();
      return true;
    }
    const count = shownCommands.length;
    if (count === 0) {
      return false;
    }
    if (event.key === 'ArrowDown' || event.key === 'ArrowUp') {
      activeCommand = (activeCommand + (event.key === 'ArrowDown' ? 1 : count - 1)) % count;
      drawCommands();
      return true;
    }
    if ((event.key === 'Tab' || event.key === 'Enter') && !event.shiftKey) {
      takeCommand(shownCommands[activeCommand]);
      return true;
    }
    return false;
  }

  window.addEventListener('message', (event) => {
    const message = event.data;
    switch (message && message.type) {
      case 'reset':
        setSession(message.session);
        commands = null;
        turns.textContent = '';
        for (const view of message.turns) {
          drawTurn(view);
        }
        setRunning(message.running);
        toBottom();
        break;
      case 'turn':
        drawTurn(message.turn);
        break;
      case 'earlier':
        earlier.hidden = !message.more;
        earlier.disabled = false;
        break;
      case 'prepend': {
        // older turns go above the first one drawn; what the user reads stays in place
        const el = document.scrollingElement || document.documentElement;
        const fromBottom = el.scrollHeight - el.scrollTop;
        const first = turns.firstElementChild;
        for (const view of message.turns) {
          drawTurn(view, first);
        }
        el.scrollTop = el.scrollHeight - fromBottom;
        earlier.hidden = !message.more;
        earlier.disabled = false;
        break;
      }
      case 'running':
        setRunning(message.running);
        break;
      case 'notice':
        showNotice(message.level, message.text);
        break;
      case 'session':
        setSession(message.session);
        commands = null;
        break;
      case 'commands':
        commands = message.commands;
        commandsError = message.error || '';
        commandsAsked = false;
        drawCommands();
        break;
      case 'queue':
        drawQueue(message.queued);
        break;
      case 'spend':
        setSpend(message.text);
        break;
      case 'images':
        drawImages(message.images);
        break;
      case 'effort':
        effort.value = message.effort;
        break;
      case 'draft':
        if (!prompt.value.trim()) {
          prompt.value = message.text;
          vscode.setState({ draft: prompt.value });
        }
        break;
    }
  });

  prompt.addEventListener('keydown', (event) => {
    if (commandKey(event)) {
      event.preventDefault();
      return;
    }
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      submit();
    }
  });
  prompt.addEventListener('input', () => {
    vscode.setState({ draft: prompt.value });
    const name = typedName();
    if (name !== undefined) {
      activeCommand = 0;
      if (name === '' || commands === null) {
        askCommands(); // a new `/`: the commands are read again
      }
    }
    drawCommands();
  });
  prompt.addEventListener('blur', () => closeCommands());
  // a picture pasted into the prompt box goes with the next prompt (its bytes, base64)
  prompt.addEventListener('paste', (event) => {
    const files = [...(event.clipboardData?.items ?? [])].filter((item) => item.kind === 'file' && item.type.startsWith('image/'));
    for (const item of files) {
      const file = item.getAsFile();
      if (!file) {
        continue;
      }
      event.preventDefault();
      const reader = new FileReader();
      reader.onload = () => {
        const url = String(reader.result || '');
        vscode.postMessage({ type: 'pasteImage', mimeType: file.type, data: url.slice(url.indexOf(',') + 1) });
      };
      reader.readAsDataURL(file);
    }
  });
  effort.addEventListener('change', () => vscode.postMessage({ type: 'effort', effort: effort.value }));
  send.addEventListener('click', () => submit());
  queueSend.addEventListener('click', () => submit('queue'));
  cancel.addEventListener('click', () => vscode.postMessage({ type: 'cancel' }));
  byId('start').addEventListener('click', () => vscode.postMessage({ type: 'start' }));
  byId('reopen').addEventListener('click', () => vscode.postMessage({ type: 'reopen' }));
  byId('session-mode').addEventListener('click', (event) => {
    event.preventDefault();
    vscode.postMessage({ type: 'setMode' });
  });
  // a child session's "open" link (under the task call that started it), a planned turn's Run this plan
  turns.addEventListener('click', (event) => {
    const run = /** @type {HTMLElement | null} */ (event.target instanceof Element ? event.target.closest('[data-run-plan]') : null);
    if (run) {
      event.preventDefault();
      vscode.postMessage({ type: 'runPlan', turnId: run.dataset.runPlan });
      return;
    }
    const link = /** @type {HTMLElement | null} */ (event.target instanceof Element ? event.target.closest('[data-open-session]') : null);
    if (link) {
      event.preventDefault();
      vscode.postMessage({ type: 'openSession', sessionId: link.dataset.openSession });
      return;
    }
    const summary = event.target instanceof Element ? event.target.closest('summary') : null;
    const fold = /** @type {HTMLDetailsElement | null} */ (summary && summary.parentElement && summary.parentElement.closest('details[data-fold]'));
    if (fold && fold.firstElementChild === summary) {
      folds.set(fold.dataset.fold || '', !fold.open); // the click toggles it next
    }
    const child = /** @type {HTMLDetailsElement | null} */ (summary && summary.parentElement && summary.parentElement.closest('details[data-child-session]'));
    if (child && child.firstElementChild === summary) {
      childFolds.set(child.dataset.childSession || '', !child.open); // the click toggles it next
    }
  });
  earlier.addEventListener('click', () => {
    earlier.disabled = true;
    vscode.postMessage({ type: 'earlier' });
  });

  setRunning(false);
  vscode.postMessage({ type: 'ready' });
})();
