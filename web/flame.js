// flame.js - an icicle graph (a flame graph drawn top down) of every thread
// of one process, built from the groups of a dump.
//
// The root is the whole process; below it the outermost frames
// (start_thread, main), and so on down to the frames that were executing.
// A box's width is the number of threads whose stack passes through it.
// Boxes of the same function under the same parent are merged, as in
// Brendan Gregg's flame graphs; inlined frames are boxes of their own,
// drawn in another colour. Drawn as SVG markup in one assignment;
// siblings too narrow to see are drawn as one grey box ("N more stacks")
// without their descendants, so the cost follows the width of the screen
// rather than the number of threads or stacks.
//
// With a base (the groups of an earlier window) it is a differential
// flame graph, as Brendan Gregg draws them: the boxes are the newer
// window's, coloured by how their share changed against the base: red
// grew, blue shrank, the deeper the more (rect[data-d] says which).

const ROW = 18; // px per frame
const MIN_WIDTH = 0.5; // px: narrower boxes are not drawn
const NARROW = 2; // px: siblings narrower than this are drawn as one box
const CHAR_WIDTH = 6.6; // px per character of the 11px monospace label
const SYSTEM_MODULE = /^\/(usr\/)?lib(32|64|x32)?\//;

const escapes = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' };
const escape = (s) => s.replace(/[&<>"]/g, (c) => escapes[c]);
const baseName = (p) => (p ? p.slice(p.lastIndexOf('/') + 1) : '');

// The name a frame is shown and merged under.
export function frameLabel(f) {
  if (f.function) return f.function;
  if (f.module) return `${baseName(f.module)}+${f.offset || f.ip}`;
  return f.ip || '??';
}

// A box's change of share against the base, in points of a percent.
function delta(node, g) {
  const now = (100 * node.count) / (g.root.count || 1);
  const then = (100 * (node.base || 0)) / (g.root.base || 1);
  return now - then;
}

function diffColour(d) {
  const s = Math.min(1, Math.abs(d) / 10); // 10 points: the deepest
  if (Math.abs(d) < 0.05) return 'hsl(0, 0%, 92%)';
  return d > 0 ? `hsl(0, 85%, ${92 - 42 * s}%)` : `hsl(215, 85%, ${92 - 42 * s}%)`;
}

// A stable hue per name: warm for code, teal for inlined frames, grey for
// frames without a symbol.
function colour(node) {
  let h = 0;
  for (let i = 0; i < node.name.length; i++) {
    h = (h * 31 + node.name.charCodeAt(i)) | 0;
  }
  const r = ((h >>> 0) % 1000) / 1000;
  if (node.more) return 'hsl(220, 8%, 80%)';
  if (!node.frame) return 'hsl(220, 10%, 70%)';
  if (!node.frame.function) return `hsl(0, 0%, ${62 + r * 14}%)`;
  if (node.frame.inlined) return `hsl(${170 + r * 25}, 55%, ${58 + r * 12}%)`;
  const system = SYSTEM_MODULE.test(node.frame.module || '');
  return system
    ? `hsl(${30 + r * 25}, 75%, ${60 + r * 10}%)`
    : `hsl(${r * 30}, 80%, ${58 + r * 10}%)`;
}

export class FlameGraph {
  // groups: the "groups" of one process (frames innermost first);
  // rootName: the label of the whole process. opts.unit names what a
  // count is ("thread" by default); opts.base makes it differential.
  constructor(groups, rootName, opts = {}) {
    this.root = { name: rootName, count: 0, base: 0, depth: 0, parent: null,
      frame: null, kids: new Map(), list: null };
    this.unit = opts.unit || 'thread';
    this.units = opts.units || `${this.unit}s`;
    this.diff = Boolean(opts.base);
    for (const g of groups) this.add(g, 'count');
    for (const g of opts.base || []) this.add(g, 'base');
    this.sortTree(this.root);
    this.zoom = this.root;
    this.query = '';
    this.drawn = [];
    this.width = 0;
  }

  // Adds g's count to field ('count', or 'base' for the base) of every
  // box on its path.
  add(g, field) {
    let node = this.root;
    node[field] += g.count;
    for (let i = g.frames.length - 1; i >= 0; i--) {
      const f = g.frames[i];
      const name = frameLabel(f);
      const key = f.inlined ? `${name}\u0000i` : name;
      let kid = node.kids.get(key);
      if (!kid) {
        kid = { name, count: 0, base: 0, depth: node.depth + 1, parent: node,
          frame: f, kids: new Map(), list: null };
        node.kids.set(key, kid);
      }
      kid[field] += g.count;
      node = kid;
    }
  }

  // Children as an array, widest first (left), then by name; boxes only
  // the base had are left out (the graph draws the newer window).
  sortTree(node) {
    node.list = [...node.kids.values()].filter((k) => k.count > 0).sort(
      (a, b) => b.count - a.count || (a.name < b.name ? -1 : 1));
    node.kids = null;
    for (const k of node.list) this.sortTree(k);
  }

  // Builds the graph's elements into container (an empty element).
  mount(container) {
    this.box = container;
    const bar = document.createElement('div');
    bar.className = 'flame-bar';
    this.info = document.createElement('span');
    this.info.className = 'flame-info';
    this.reset = document.createElement('button');
    this.reset.type = 'button';
    this.reset.className = 'flame-reset';
    this.reset.textContent = 'Reset zoom';
    this.reset.hidden = true;
    bar.append(this.info, this.reset);
    this.svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    this.svg.setAttribute('class', 'flame-svg');
    this.svg.setAttribute('role', 'img');
    this.svg.setAttribute('aria-label', 'flame graph');
    container.append(bar, this.svg);
    this.showHint();
    this.svg.addEventListener('mouseover', (e) => this.hover(e));
    this.svg.addEventListener('mouseleave', () => this.showHint());
    this.svg.addEventListener('click', (e) => this.click(e));
    this.reset.addEventListener('click', () => this.zoomTo(this.root));
  }

  showHint() {
    const n = this.root.count;
    this.info.textContent = `${n} ${n === 1 ? this.unit : this.units}. ` +
      (this.diff ? 'Red grew, blue shrank against the window before. ' : '') +
      `Hover a box for its frame and ${this.units}; click to zoom.`;
  }

  // The node of the box under an event, or null. (A box is a rect, and
  // a text on it when it is wide enough; both carry the node's index.)
  nodeAt(e) {
    const i = e.target.getAttribute('data-i');
    return i === null ? null : this.drawn[+i];
  }

  hover(e) {
    const n = this.nodeAt(e);
    if (n) this.info.textContent = this.describe(n);
  }

  describe(n) {
    const total = this.root.count || 1;
    const pct = ((100 * n.count) / total).toFixed(1);
    let s = `${n.name} — ${n.count} ${n.count === 1 ? this.unit : this.units} (${pct}%)`;
    if (this.diff && !n.more) {
      const d = delta(n, this);
      s += ` · ${d >= 0 ? '+' : ''}${d.toFixed(1)} points against the window before`;
    }
    if (n.more) s += ' · too narrow to draw one by one: click to zoom, or search';
    const f = n.frame;
    if (f) {
      if (f.inlined) s += ' · inlined';
      if (f.file) s += ` · ${f.file}${f.line ? `:${f.line}` : ''}`;
      if (f.module) s += ` · ${f.module}`;
    }
    return s;
  }

  // Clicking a box zooms to it; clicking the zoomed box or one above it
  // zooms out to that one (the root shows everything again). Narrow
  // stacks drawn as one box widen when their parent is zoomed to.
  click(e) {
    const n = this.nodeAt(e);
    if (!n) return;
    if (n.more) this.zoomTo(n.parent);
    else this.zoomTo(n === this.zoom && n.parent ? n.parent : n);
  }

  zoomTo(n) {
    this.zoom = n;
    this.reset.hidden = n === this.root;
    this.draw();
  }

  // The names from the root down to the zoomed box, to zoom the same way
  // after a refresh.
  zoomPath() {
    const path = [];
    for (let n = this.zoom; n.parent; n = n.parent) path.unshift(n.name);
    return path;
  }

  restoreZoom(path) {
    let n = this.root;
    for (const name of path || []) {
      const next = n.list.find((k) => k.name === name);
      if (!next) break;
      n = next;
    }
    this.zoom = n;
    this.reset.hidden = n === this.root;
  }

  // Lays the graph out at the container's current width. Cheap enough to
  // call again on every zoom and resize.
  draw() {
    const width = this.box.clientWidth;
    if (!width) return;
    this.width = width;
    this.drawn = [];
    const out = [];
    const scale = width / (this.zoom.count || 1);
    let depth = 0;
    // The zoomed box's ancestors span the whole width, dimmed; the root
    // first, so that it is always box 0.
    const above = [];
    for (let a = this.zoom.parent; a; a = a.parent) above.unshift(a);
    for (const a of above) this.box1(out, a, 0, width, 'anc');
    const place = (n, x, w) => {
      this.box1(out, n, x, w, n.more ? 'more' : '');
      if (n.depth > depth) depth = n.depth;
      let narrow = null; // the narrow children: the last ones, by width
      for (const k of n.list) {
        const kw = k.count * scale;
        if (kw < NARROW) {
          narrow = narrow || { x, w: 0, count: 0, kids: 0 };
          narrow.w += kw;
          narrow.count += k.count;
          narrow.kids++;
        } else {
          place(k, x, kw);
        }
        x += kw;
      }
      if (narrow && narrow.w >= MIN_WIDTH) {
        const more = narrow.kids === 1 ? 'stack' : 'stacks';
        place({ name: `${narrow.kids} more ${more}`, count: narrow.count, depth: n.depth + 1,
          parent: n, frame: null, list: [], more: true }, narrow.x, narrow.w);
      }
    };
    place(this.zoom, 0, width);
    const height = (Math.max(depth, this.zoom.depth) + 1) * ROW;
    this.svg.setAttribute('width', width);
    this.svg.setAttribute('height', height);
    this.svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
    this.svg.innerHTML = out.join('');
    this.rects = this.svg.getElementsByTagName('rect');
    this.svg.dataset.zoom = this.zoom.name;
    this.highlight(this.query);
  }

  box1(out, n, x, w, cls) {
    const i = this.drawn.push(n) - 1;
    const y = n.depth * ROW;
    const chars = Math.floor((w - 6) / CHAR_WIDTH);
    let label = '';
    if (chars >= 3) {
      label = n.name.length <= chars ? n.name : `${n.name.slice(0, chars - 1)}…`;
    }
    const kind = n.frame && n.frame.inlined ? ' inl' : '';
    let fill = colour(n);
    let d = '';
    if (this.diff && !n.more) {
      const dv = delta(n, this);
      fill = diffColour(dv);
      d = ` data-d="${Math.abs(dv) < 0.05 ? 'same' : dv > 0 ? 'grew' : 'shrank'}"`;
    }
    out.push(`<rect data-i="${i}"${d} class="fb${kind}${cls ? ` ${cls}` : ''}" x="${x.toFixed(2)}"`,
      ` y="${y}" width="${Math.max(w - 0.5, 0.5).toFixed(2)}" height="${ROW - 1}" fill="${fill}"/>`);
    if (label) {
      out.push(`<text data-i="${i}" x="${(x + 3).toFixed(2)}" y="${y + ROW - 5}">${escape(label)}</text>`);
    }
  }

  // Marks the boxes whose frame matches every word of query (lower case).
  highlight(query) {
    const had = this.query;
    this.query = query;
    if (!query && !had) return; // nothing marked, nothing to mark
    const words = query ? query.split(/\s+/).filter(Boolean) : [];
    const boxes = this.rects || [];
    for (let i = 0; i < boxes.length; i++) {
      const n = this.drawn[i];
      const f = n.frame;
      let hit = false;
      if (words.length && f) {
        const hay = `${n.name} ${f.file || ''} ${f.module || ''}`.toLowerCase();
        hit = words.every((w) => hay.includes(w));
      }
      boxes[i].classList.toggle('match', hit);
    }
  }
}
