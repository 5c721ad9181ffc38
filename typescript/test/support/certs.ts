/** Throwaway certificate authorities and certificates, made with the `openssl` command. */
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

function openssl(dir: string, ...args: string[]): void {
  execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });
}

/** A CA in `dir` named `name`: its certificate is `name.pem`. */
export class Ca {
  constructor(
    private readonly dir: string,
    readonly name: string,
  ) {
    openssl(dir, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", `/CN=${name}`, "-keyout", `${name}.key`, "-out", `${name}.pem`, "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign");
  }

  get pem(): string {
    return readFileSync(join(this.dir, `${this.name}.pem`), "utf8");
  }

  /** Issues `file.pem` and `file.key` for `subjectAltName` (`IP:127.0.0.1,DNS:localhost` or
   * `URI:spiffe://…`), for a server or a client. */
  issue(file: string, subjectAltName: string, server: boolean): { cert: string; key: string } {
    openssl(this.dir, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", `/CN=${file}`, "-keyout", `${file}.key`, "-out", `${file}.csr`);
    writeFileSync(join(this.dir, `${file}.ext`), `subjectAltName=${subjectAltName}\nextendedKeyUsage=${server ? "serverAuth" : "clientAuth"}\n`);
    openssl(this.dir, "x509", "-req", "-in", `${file}.csr`, "-CA", `${this.name}.pem`, "-CAkey", `${this.name}.key`, "-CAcreateserial", "-days", "1", "-extfile", `${file}.ext`, "-out", `${file}.pem`);
    return { cert: join(this.dir, `${file}.pem`), key: join(this.dir, `${file}.key`) };
  }
}
