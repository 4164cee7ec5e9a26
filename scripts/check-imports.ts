/**
 * The import rules of the layout below, checked over every file under src/ (tests beside the
 * code included): each area imports only itself and the areas its row names, static and dynamic
 * imports alike. `npm run lint:imports` runs it, and `.ci/run` after the lint. Prints one line per
 * broken rule and exits 1; exits 0 with a summary when every import keeps to the layout.
 *
 *   domain                          nothing of the app, no package but node:crypto (pure logic, no I/O)
 *   provider                        domain
 *   sandbox                         domain, provider
 *   db, events                      domain
 *   imports                         domain (parsers of bank statements and provider reports)
 *   reports                         domain, db
 *   config, logger, metrics         domain
 *   producers consumers jobs web api  domain, provider, sandbox, db, events, imports, reports, config,
 *                                   logger, metrics; never each other
 *   embedded                        nothing of the app (the app reaches it over the network)
 *   wiring (cli.ts, wiring.ts and every other file at the top of src/)
 *                                   everything; the only importers of embedded
 *
 * No cycles: no file reaches itself through its imports, whatever their kind (static, type-only,
 * re-exports and dynamic `import()` alike), so every module of src/ can be read, and evaluated, after
 * the ones it names. Each cycle is printed on one line, file by file.
 *
 * Besides: any area but the domain may import the `Logger` type (type-only: how a log function is
 * injected); a command's entry point (ENTRY_POINTS) also reads the config, the root logger and the
 * command's error path (src/cli-errors.ts); a test beside the code may import fixtures from test/.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

const ROOT = resolve(dirname(new URL(import.meta.url).pathname), '..');
const SRC = join(ROOT, 'src');

/** The areas an adapter may import (every area the adapters stand on). */
const BELOW_ADAPTERS = [
  'domain',
  'provider',
  'sandbox',
  'db',
  'events',
  'imports',
  'reports',
  'config',
  'logger',
  'metrics',
] as const;
const AREAS = [
  ...BELOW_ADAPTERS,
  'producers',
  'consumers',
  'jobs',
  'web',
  'api',
  'embedded',
  'wiring',
] as const;
type Area = (typeof AREAS)[number];

/** What each area may import besides itself. */
const MAY_IMPORT: Record<Area, readonly Area[]> = {
  domain: [],
  provider: ['domain'],
  sandbox: ['domain', 'provider'],
  db: ['domain'],
  events: ['domain'],
  imports: ['domain'],
  reports: ['domain', 'db'],
  config: ['domain'],
  logger: ['domain'],
  metrics: ['domain'],
  producers: BELOW_ADAPTERS,
  consumers: BELOW_ADAPTERS,
  jobs: BELOW_ADAPTERS,
  web: BELOW_ADAPTERS,
  api: BELOW_ADAPTERS,
  embedded: [],
  wiring: AREAS.filter((a) => a !== 'wiring'),
};

/**
 * The commands' entry points, lazily imported by src/cli.ts (`payrecon sandbox`, `report`, `web`, `db`,
 * `topics`, and the bootstrap of the publishing commands): besides their area's rules they read the
 * config (and the running instance's endpoints, src/endpoints.ts), take the root logger and answer
 * failures through the command's one error path (src/cli-errors.ts), as the CLI does.
 */
const ENTRY_POINTS = new Set([
  'src/sandbox/main.ts',
  'src/reports/main.ts',
  'src/web/main.ts',
  'src/db/cli.ts',
  'src/events/cli.ts',
  'src/producers/connect.ts',
]);
// src/endpoints.ts: the running `payrecon up`'s addresses, the command's other source of them besides
// the config.
const ENTRY_POINT_IMPORTS = new Set([
  'src/config.ts',
  'src/logger.ts',
  'src/cli-errors.ts',
  'src/endpoints.ts',
]);

/** The only package the domain imports: hashing and comparing is computation, not I/O. */
const DOMAIN_PACKAGES = new Set(['node:crypto']);
/** Packages the domain's tests may use besides. */
const DOMAIN_TEST_PACKAGES = new Set(['vitest', 'fast-check']);

/**
 * Known violations, each with the reason it stays for now; remove an entry once its file is fixed (an
 * entry that no longer matches anything fails the check, so the list cannot go stale).
 */
const ALLOWED: readonly { from: string; to: string; why: string }[] = [];

/** The area of a file under src/, or null when the layout names none. */
function areaOf(srcDir: string, file: string): Area | null {
  const rel = relative(srcDir, file).split('\\').join('/');
  const [head, ...rest] = rel.split('/');
  if (head === undefined) return null;
  if (rest.length === 0) {
    // src/config.ts, logger.ts, metrics.ts are areas of their own; every other file at the top
    // (cli.ts, wiring.ts, parts.ts, cli-errors.ts, endpoints.ts ...) is the command and its wiring.
    const base = head.replace(/(\.test)?\.ts$/, '');
    return base === 'config' || base === 'logger' || base === 'metrics' ? base : 'wiring';
  }
  return (AREAS as readonly string[]).includes(head) ? (head as Area) : null;
}

function* sourceFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* sourceFiles(path);
    else if (/\.(ts|mts|cts)$/.test(entry.name) && !entry.name.endsWith('.d.ts')) yield path;
  }
}

/** Every import of a file: its specifier and whether it brings only types (erased at run time). */
function importsOf(file: string): { spec: string; typeOnly: boolean }[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false);
  const out: { spec: string; typeOnly: boolean }[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const named = clause?.namedBindings;
      const typeOnly =
        clause !== undefined &&
        (clause.isTypeOnly ||
          (clause.name === undefined &&
            named !== undefined &&
            ts.isNamedImports(named) &&
            named.elements.length > 0 &&
            named.elements.every((e) => e.isTypeOnly)));
      out.push({ spec: node.moduleSpecifier.text, typeOnly });
    } else if (
      ts.isExportDeclaration(node) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      out.push({ spec: node.moduleSpecifier.text, typeOnly: node.isTypeOnly });
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] !== undefined &&
      ts.isStringLiteralLike(node.arguments[0])
    ) {
      out.push({ spec: node.arguments[0].text, typeOnly: false });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

/** True when a file reads `process.env` (configuration is read in src/config.ts only). */
function readsEnvironment(file: string): boolean {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false);
  let found = false;
  const visit = (node: ts.Node) => {
    if (
      ts.isPropertyAccessExpression(node) &&
      ts.isIdentifier(node.expression) &&
      node.expression.text === 'process' &&
      node.name.text === 'env'
    ) {
      found = true;
    }
    if (!found) ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

interface Problem {
  from: string;
  to: string;
  rule: string;
  /** For an import cycle: its files in import order, the first repeated at the end. */
  cycle?: string[];
}

/**
 * One cycle per strongly connected component of the import graph (Tarjan's algorithm, iterative): the
 * shortest way from the component's first file (by name) back to itself. Breaking it may leave another
 * cycle in the same component, which the next run names.
 */
export function importCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const nodes = [...graph.keys()].sort();
  const next = (n: string) => [...new Set(graph.get(n) ?? [])].filter((m) => graph.has(m)).sort();
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const components: string[][] = [];
  let counter = 0;
  for (const root of nodes) {
    if (index.has(root)) continue;
    const work: { node: string; edges: string[]; at: number }[] = [];
    const enter = (n: string) => {
      index.set(n, counter);
      low.set(n, counter);
      counter += 1;
      stack.push(n);
      onStack.add(n);
      work.push({ node: n, edges: next(n), at: 0 });
    };
    enter(root);
    while (work.length > 0) {
      const top = work[work.length - 1] as (typeof work)[number];
      if (top.at < top.edges.length) {
        const m = top.edges[top.at] as string;
        top.at += 1;
        if (!index.has(m)) enter(m);
        else if (onStack.has(m)) low.set(top.node, Math.min(low.get(top.node) ?? 0, index.get(m) ?? 0));
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low.set(parent.node, Math.min(low.get(parent.node) ?? 0, low.get(top.node) ?? 0));
      if (low.get(top.node) === index.get(top.node)) {
        const component: string[] = [];
        let n: string | undefined;
        do {
          n = stack.pop() as string;
          onStack.delete(n);
          component.push(n);
        } while (n !== top.node);
        if (component.length > 1 || next(top.node).includes(top.node)) components.push(component.sort());
      }
    }
  }
  return components
    .map((component) => {
      const members = new Set(component);
      const start = component[0] as string;
      // Breadth first from the start back to it, inside the component.
      const cameFrom = new Map<string, string>();
      const queue = [start];
      while (queue.length > 0) {
        const n = queue.shift() as string;
        for (const m of next(n)) {
          if (!members.has(m) || cameFrom.has(m)) continue;
          cameFrom.set(m, n);
          if (m === start) {
            queue.length = 0;
            break;
          }
          queue.push(m);
        }
      }
      const path = [start];
      for (let n = cameFrom.get(start) as string; n !== start; n = cameFrom.get(n) as string) path.push(n);
      return [start, ...path.slice(1).reverse(), start];
    })
    .sort((a, b) => (a[0] as string).localeCompare(b[0] as string));
}

/** Checks every file under `srcDir` (default this repository's src/); paths are relative to its parent. */
export function checkImports(
  srcDir: string = SRC,
  allowlist: readonly { from: string; to: string; why: string }[] = ALLOWED,
): { files: number; imports: number; problems: Problem[] } {
  const root = dirname(srcDir);
  const problems: Problem[] = [];
  const used = new Set<(typeof allowlist)[number]>();
  const graph = new Map<string, string[]>();
  let files = 0;
  let imports = 0;
  for (const file of sourceFiles(srcDir)) {
    files += 1;
    const from = relative(root, file);
    const edges: string[] = [];
    graph.set(from, edges);
    const area = areaOf(srcDir, file);
    if (area === null) {
      problems.push({ from, to: '-', rule: 'lies outside the layout (no area)' });
      continue;
    }
    const isTest = /\.test\.ts$/.test(file);
    if (!isTest && area !== 'config' && readsEnvironment(file)) {
      problems.push({
        from,
        to: 'process.env',
        rule: 'the environment is read only in src/config.ts (pass the config or a value from it)',
      });
    }
    for (const { spec, typeOnly } of importsOf(file)) {
      imports += 1;
      if (!spec.startsWith('.')) {
        if (area === 'domain' && !DOMAIN_PACKAGES.has(spec) && !(isTest && DOMAIN_TEST_PACKAGES.has(spec))) {
          problems.push({
            from,
            to: spec,
            rule: 'domain imports no package but node:crypto (pure logic, no I/O)',
          });
        }
        continue;
      }
      const target = resolve(dirname(file), spec);
      const to = relative(root, target);
      edges.push(to);
      if (!target.startsWith(`${srcDir}/`)) {
        // A test beside the code may share the fixtures under test/.
        if (isTest && target.startsWith(`${root}/test/`)) continue;
        problems.push({ from, to, rule: 'src imports nothing outside src' });
        continue;
      }
      const targetArea = areaOf(srcDir, target);
      if (targetArea === area) continue;
      if (targetArea !== null && MAY_IMPORT[area].includes(targetArea)) continue;
      // The `Logger` type is how a log function is injected: any area but the domain may name it.
      if (typeOnly && targetArea === 'logger' && area !== 'domain') continue;
      // A command's entry point also reads the config and takes the root logger, as the CLI does.
      if (ENTRY_POINTS.has(from) && ENTRY_POINT_IMPORTS.has(to)) continue;
      const allowed = allowlist.find((a) => a.from === from && a.to === to);
      if (allowed) {
        used.add(allowed);
        continue;
      }
      const may = MAY_IMPORT[area];
      problems.push({
        from,
        to,
        rule: `${area} may import ${may.length === 0 ? 'nothing of the app' : `only ${may.join(', ')}`}`,
      });
    }
  }
  for (const cycle of importCycles(graph)) {
    problems.push({ from: cycle[0] as string, to: cycle[1] as string, rule: 'import cycle', cycle });
  }
  for (const a of allowlist) {
    if (!used.has(a)) {
      problems.push({ from: a.from, to: a.to, rule: 'allow-list entry matches no import: remove it' });
    }
  }
  return { files, imports, problems };
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(new URL(import.meta.url).pathname)) {
  // A tree other than this repository's src/ may be named (the check's own test does).
  const { files, imports, problems } = checkImports(process.argv[2] ? resolve(process.argv[2]) : SRC);
  for (const p of problems) {
    process.stderr.write(
      p.cycle
        ? `payrecon: imports: cycle: ${p.cycle.join(' -> ')}\n`
        : `payrecon: imports: ${p.from} -> ${p.to}: ${p.rule}\n`,
    );
  }
  if (problems.length > 0) {
    process.stderr.write(
      `payrecon: imports: ${problems.length} problem(s): imports that break the layout or close a cycle\n`,
    );
    process.exit(1);
  }
  process.stdout.write(
    `imports: ${files} files, ${imports} imports keep to the layout, no cycle` +
      (ALLOWED.length > 0 ? ` (${ALLOWED.length} allowed for now)\n` : '\n'),
  );
}
