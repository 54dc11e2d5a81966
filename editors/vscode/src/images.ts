/**
 * Images given with a prompt (session/turn's `images`): the ones waiting for the next prompt
 * (attached from a file with **Attach Image…** or pasted into the prompt box), each a chip under
 * the box until it is sent or removed; and a turn's images in the transcript (`Turn.images`:
 * type and size, and the picture, read with session/image).
 */

import * as fs from 'fs';
import * as path from 'path';

import { escapeHtml } from './markdown';
import { ImageInput, ImageRef, ImageResult, Method } from './protocol';
import type { ImageType, Requester } from './protocolTypes';

/** The types the daemon takes, by file extension. */
const TYPES: Record<string, ImageType> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
};

export const IMAGE_EXTENSIONS = Object.keys(TYPES).map((e) => e.slice(1));

/** An image waiting for the next prompt: what session/turn gets, and what its chip and the
 * turn show before the daemon has it. */
export interface Attachment {
  id: string;
  /** The file's name, or "pasted image". */
  label: string;
  input: ImageInput;
  mimeType: ImageType;
  bytes: number;
  /** A data: URL of the picture, for the turn drawn before the daemon answers. */
  dataUrl: string;
}

/** What a turn of the transcript shows of an image: its type and size, and its picture once read. */
export interface ShownImage {
  sha256?: string;
  mimeType: string;
  bytes: number;
  dataUrl?: string;
}

/** "1.2 MB", "340 KB", "812 bytes". */
export function sizeText(bytes: number): string {
  if (bytes >= 1024 * 1024) {
    return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
  }
  return bytes >= 1024 ? `${Math.round(bytes / 1024)} KB` : `${bytes} bytes`;
}

/** The type a file's name says; undefined for one the daemon does not take. */
export function imageType(file: string): ImageType | undefined {
  return TYPES[path.extname(file).toLowerCase()];
}

/** A file as session/turn's image: `{path}` (relative) when it is under `root`, else its bytes. */
export function fileAttachment(file: string, root: string, id: string): Attachment {
  const mimeType = imageType(file);
  if (!mimeType) {
    throw new Error(`${path.basename(file)} is not a PNG, JPEG, GIF or WebP image`);
  }
  const data = fs.readFileSync(file);
  const relative = path.relative(root, file);
  const inside = relative !== '' && !relative.startsWith('..') && !path.isAbsolute(relative);
  return {
    id,
    label: path.basename(file),
    input: inside ? { path: relative } : { data: data.toString('base64'), mimeType },
    mimeType,
    bytes: data.length,
    dataUrl: `data:${mimeType};base64,${data.toString('base64')}`,
  };
}

/** A pasted image (the prompt box's clipboard, as base64) as session/turn's image. */
export function pastedAttachment(data: string, mimeType: string, id: string): Attachment {
  if (!Object.values(TYPES).includes(mimeType as ImageType)) {
    throw new Error(`a pasted ${mimeType || 'file'} is not a PNG, JPEG, GIF or WebP image`);
  }
  const type = mimeType as ImageType;
  return {
    id,
    label: 'pasted image',
    input: { data, mimeType: type },
    mimeType: type,
    bytes: Buffer.from(data, 'base64').length,
    dataUrl: `data:${type};base64,${data}`,
  };
}

/** The images waiting for the next prompt, in the order attached. */
export class Attachments {
  private list: Attachment[] = [];
  private ids = 0;
  private readonly listeners = new Set<() => void>();

  get items(): readonly Attachment[] {
    return this.list;
  }

  nextId(): string {
    return `image-${++this.ids}`;
  }

  add(attachment: Attachment): void {
    this.list.push(attachment);
    this.changed();
  }

  remove(id: string): void {
    this.list = this.list.filter((a) => a.id !== id);
    this.changed();
  }

  /** The images for the prompt being sent; the chips go. */
  take(): Attachment[] {
    const taken = this.list;
    this.list = [];
    this.changed();
    return taken;
  }

  /** Images the daemon refused with their prompt, back as chips (before any attached since). */
  restore(attachments: Attachment[]): void {
    this.list = [...attachments, ...this.list];
    this.changed();
  }

  onDidChange(listener: () => void): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  private changed(): void {
    for (const listener of this.listeners) {
      listener();
    }
  }
}

/** The chips' words: "diagram.png · image/png · 12 KB". */
export function chipText(a: Attachment): string {
  return `${a.label} · ${a.mimeType} · ${sizeText(a.bytes)}`;
}

/** A turn's images, each its type and size and, once read, the picture. */
export function imagesHtml(images: readonly ShownImage[] | undefined): string {
  if (!images?.length) {
    return '';
  }
  const items = images.map((image) => {
    const caption = `${image.mimeType} · ${sizeText(image.bytes)}`;
    const picture = image.dataUrl?.startsWith('data:image/')
      ? `<img class="turn-image-picture" src="${escapeHtml(image.dataUrl)}" alt="${escapeHtml(caption)}">`
      : '';
    const sha = image.sha256 ? ` data-sha256="${escapeHtml(image.sha256)}"` : '';
    return `<figure class="turn-image"${sha}>${picture}<figcaption>${escapeHtml(caption)}</figcaption></figure>`;
  });
  return `<div class="turn-images">${items.join('')}</div>`;
}

export function shownImages(refs: readonly ImageRef[] | undefined): ShownImage[] | undefined {
  return refs?.length ? refs.map((r) => ({ sha256: r.sha256, mimeType: r.mimeType, bytes: r.bytes })) : undefined;
}

/** Pictures larger than this are shown by type and size only (the view holds them as data URLs). */
const PICTURE_LIMIT = 8 * 1024 * 1024;

/** Read the pictures of `images` not read yet (session/image); true when one was. */
export async function readPictures(client: Requester, sessionId: string, images: ShownImage[]): Promise<boolean> {
  let read = false;
  for (const image of images) {
    if (image.dataUrl || !image.sha256 || image.bytes > PICTURE_LIMIT) {
      continue;
    }
    const answer: ImageResult = await client.request(Method.image, { sessionId, sha256: image.sha256 });
    image.dataUrl = `data:${answer.mimeType};base64,${answer.data}`;
    read = true;
  }
  return read;
}
