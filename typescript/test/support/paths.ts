/** Where the repository's files are, from the compiled test's location (dist/test/support). */
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root: the first parent directory holding `crates/wire/proto`. */
function findRepo(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "crates", "wire", "proto"))) {
    const up = dirname(dir);
    if (up === dir) {
      throw new Error("cannot find the repository root above the tests");
    }
    dir = up;
  }
  return dir;
}

export const REPO = findRepo();

/** A path inside the repository. */
export function repoPath(...parts: string[]): string {
  return resolve(REPO, ...parts);
}
