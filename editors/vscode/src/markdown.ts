/**
 * Markdown to HTML for the chat view. Raw HTML in a reply is shown as text, never run or
 * loaded; links open outside the view; images are not fetched (the view's CSP forbids it).
 */

import MarkdownIt from 'markdown-it';

const md = new MarkdownIt({ html: false, linkify: true, breaks: false, typographer: false });

// An image would be a request to somewhere else: show it as a link instead.
md.renderer.rules.image = (tokens, idx) => {
  const token = tokens[idx];
  const src = token.attrGet('src') ?? '';
  const alt = token.content || src;
  return `<a href="${escapeHtml(src)}" title="image">${escapeHtml(alt)}</a>`;
};

export function renderMarkdown(text: string): string {
  return md.render(text);
}

export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}
