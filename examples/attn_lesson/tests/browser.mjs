// Debian's Chromium, headless, through playwright-core (no browser download). Where a piece is
// missing the tests are skipped: exit 77 (CTest's SKIP_RETURN_CODE) with the reason; with
// ATTN_LESSON_REQUIRE=1 in the environment (.ci/run, which installs them) that is a failure.
import { existsSync } from "node:fs";

export const chromium_path = process.env.ATTN_CHROMIUM || "/usr/bin/chromium";

export function skip(reason) {
  if (process.env.ATTN_LESSON_REQUIRE === "1") {
    console.log(`FAIL (ATTN_LESSON_REQUIRE=1): ${reason}`);
    process.exit(1);
  }
  console.log(`SKIP: ${reason}`);
  process.exit(77);
}

export function need_file(path, why) {
  if (!existsSync(path)) skip(`${why} (${path} is missing)`);
}

export async function launch() {
  let playwright;
  try {
    playwright = await import("playwright-core");
  } catch {
    skip("playwright-core is not installed: cd examples/attn_lesson/tests && npm ci");
  }
  if (!existsSync(chromium_path)) skip(`no Chromium at ${chromium_path}: apt-get install -y chromium, or set ATTN_CHROMIUM`);
  // --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start
  return playwright.chromium.launch({ executablePath: chromium_path, headless: true, args: ["--no-sandbox"] });
}
