/** The kinds of file payrecon imports: the bank's statements and the provider's two reports. */
export const IMPORT_KINDS = ['bank-statement', 'provider-transactions', 'provider-settlements'] as const;
export type ImportKind = (typeof IMPORT_KINDS)[number];
