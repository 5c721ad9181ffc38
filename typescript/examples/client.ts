import { Client } from "agentsessions";

const client = new Client(process.argv[2] ?? "127.0.0.1:8080");
const turn = client.exec("hello", { harness: "echo" });
for await (const item of turn) console.log(item.case);   // session, then records and deltas
const result = await turn.result();
console.log(result.output);                               // echo:hello
const report = await client.verify(result.session.metadata!.uid);
console.log(report.ok ? "verified" : report.failures);    // every hash recomputed in TypeScript
client.close();
