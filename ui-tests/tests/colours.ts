/** Colours as the UI tests read them from computed styles. */

/** The relative luminance (0 black, 1 white) of a CSS `rgb(...)`/`rgba(...)` colour. */
export function luminance(colour: string): number {
  const [r, g, b] = (colour.match(/[\d.]+/g) ?? ['0', '0', '0']).slice(0, 3).map(Number);
  const linear = (c: number) => {
    const v = c / 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b);
}
