/**
 * The site's icon, answered at /favicon.ico (where browsers look) and named by every page's head: a
 * small SVG, the header's navy with a check mark (reconciled), readable at 16 pixels.
 */
export const FAVICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#1d2a44"/><path d="M8 16.5l5.5 5.5L24 10.5" fill="none" stroke="#fff" stroke-width="4" stroke-linecap="round" stroke-linejoin="round"/></svg>`;
