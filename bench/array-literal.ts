/**
 * Array literals (`{a,"b c",NULL}`) for bench:ledger's floor of column arrays sent as text; the ledger's
 * own statements send binary arrays.
 */
const NEEDS_ESCAPE = /["\\]/;

/** Elements the server reads unquoted as themselves: ids, statuses, amounts, ISO instants. */
const BARE = /^[A-Za-z0-9_.:+-]+$/;

const NULL_WORD = /^null$/i;

/**
 * An array literal of the values (`{a,"b c",NULL}`), for a text array sent as text (bench:ledger's floor
 * of column arrays; the ledger's own statements send binary arrays, `rowsSource` and `keyArrays`): an element made only of letters, digits and `_.:+-` goes
 * bare, any other (empty, spaces, commas, braces, JSON, the word NULL in any case) quoted, with a
 * backslash before `"` and `\` only. Built here, as one flat string, because the driver's own array serialisation runs two
 * regular expressions per element. (Bare elements: a 10,000-observation bench:ledger run wrote 17.56 MB
 * to its sockets instead of 18.00 MB.)
 */
export function arrayLiteral(values: readonly (string | null)[]): string {
  if (values.length === 0) return '{}';
  // A value equal to the previous one reuses its element (keys come in order: accounts and kinds repeat).
  const parts = new Array<string>(values.length);
  let last: string | null | undefined;
  let lastElement = 'NULL';
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v !== last) {
      last = v;
      lastElement = element(v);
    }
    parts[i] = lastElement;
  }
  // The braces joined with the elements, so the literal is one flat string: `{${...}}` around the join
  // made a rope that the driver flattened, a second copy of every literal sent.
  parts[0] = `{${parts[0]}`;
  parts[parts.length - 1] = `${parts[parts.length - 1]}}`;
  return parts.join(',');
}

/** One element of an array literal (see `arrayLiteral`). */
function element(v: string | null | undefined): string {
  // undefined as null too: JSON.stringify left it out and the server read NULL.
  if (v === null || v === undefined) return 'NULL';
  if (BARE.test(v) && (v.length !== 4 || !NULL_WORD.test(v))) return v;
  return NEEDS_ESCAPE.test(v) ? quoted(v) : `"${v}"`;
}

/**
 * `v` in double quotes with a backslash before each `"` and `\`, by one scan of its character codes (the
 * regular expression's replace cost three times as much on the details' JSON, every one of which has
 * quotes).
 */
function quoted(v: string): string {
  let out = '"';
  let from = 0;
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c === 34 || c === 92) {
      out += `${v.slice(from, i)}\\`;
      from = i;
    }
  }
  return `${out}${v.slice(from)}"`;
}
