// Screenshots of the lesson page for a person to look at: desktop (1200 px) and phone (390 px)
// widths, after ▶ translate has finished and β is at 2, every stage of the block and of the tiny model shown; and each
// later widget alone at the desktop's width (lesson_block.png, …). Usage:
//   node screenshots.mjs page.html out_dir
// Exit 77 (CTest's skip) when Chromium or playwright-core is missing.
import { mkdirSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { launch, need_file } from "./browser.mjs";

const [page_path, out_dir] = process.argv.slice(2);
need_file(page_path, "no page to photograph: attn_lesson_page writes it");
const browser = await launch();
mkdirSync(out_dir, { recursive: true });
for (const [name, width, height] of [["desktop", 1200, 900], ["phone", 390, 844]]) {
  const page = await browser.newPage({ viewport: { width, height }, deviceScaleFactor: 1 });
  await page.goto(pathToFileURL(page_path).href);
  await page.waitForSelector("body[data-ready='1']", { timeout: 20000 });
  await page.fill("#s1-beta", "2");
  await page.click("button[data-word='1']");
  await page.screenshot({ path: `${out_dir}/lesson_${name}_top.png` });
  for (const id of ["#block-all", "#model-all"]) if (await page.$(id)) await page.click(id);
  await page.screenshot({ path: `${out_dir}/lesson_${name}_full.png`, fullPage: true });
  if (name === "desktop")
    for (const id of ["block", "model"]) if (await page.$(`#${id}`)) await page.locator(`#${id}`).screenshot({ path: `${out_dir}/lesson_${id}.png` });
  await page.close();
}
await browser.close();
console.log(`screenshots in ${out_dir}`);
