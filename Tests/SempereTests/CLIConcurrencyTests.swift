import Foundation
import Synchronization
import Testing

/// Several `sempere` processes of one device at once (issue 42): each reads this device's signed manifest, changes
/// it and writes it, so without the lock on the device's state (`<config>/vaults/<vault_id>.lock`) one process's
/// change was lost: a deletion that vanished from the manifest brings its note back as live when the provider puts
/// the file back, and a note left out of it can be deleted by the provider unnoticed.
extension CLITests {
    @Test("twenty notes written and twenty removed by forty processes at once: the manifest lists exactly what exists")
    func fortyProcessesAtOnce() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let created = try scratch.run("A", ["create", scratch.vault, "--name", "Laptop", "--json"])
        #expect(created.status == 0, "\(created.err)")
        let device = try #require((try created.json() as? [String: Any])?["device_id"] as? String)
        var doomed: [String] = []
        for index in 0..<20 {
            let made = try scratch.run("A", ["new", "Old \(index)", "--text", "to go", "--json"])
            doomed.append(try #require((try made.json() as? [String: Any])?["id"] as? String, "\(made.err)"))
        }

        let toRemove = doomed
        let results = Mutex<[(String, Result)]>([])
        let group = DispatchGroup()
        for index in 0..<40 {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                let arguments =
                    index % 2 == 0
                    ? ["new", "New \(index / 2)", "--text", "kept"]
                    : ["rm", toRemove[index / 2]]
                let result = (try? scratch.run("A", arguments)) ?? Result(status: -1, out: "", err: "did not run")
                results.withLock { $0.append((arguments.joined(separator: " "), result)) }
            }
        }
        group.wait()
        for (command, result) in results.withLock({ $0 }) {
            #expect(result.status == 0, "sempere \(command): \(result.err)")
        }

        // The manifest lists exactly the notes whose files exist, and every deletion.
        let folder = URL(fileURLWithPath: scratch.vault)
        let onDisk = Set(
            try FileManager.default.contentsOfDirectory(
                atPath: folder.appendingPathComponent("notes/\(device)").path
            ).filter { $0.hasSuffix(".age") }.map { String($0.dropLast(4)) })
        let file = try JSONSerialization.jsonObject(
            with: try Data(contentsOf: folder.appendingPathComponent("manifests/\(device).json")))
        let bodyText = try #require((file as? [String: Any])?["body"] as? String)
        let body = try #require(try JSONSerialization.jsonObject(with: Data(bodyText.utf8)) as? [String: Any])
        let listed = Set(try #require(body["notes"] as? [String: Int]).keys)
        let deleted = Set(try #require(body["deleted"] as? [String: Int]).keys)
        #expect(onDisk.count == 20)
        #expect(listed == onDisk)
        #expect(deleted == Set(doomed))
        let titles = try #require(try scratch.run("A", ["ls", "--json"]).json() as? [String: Any])
        #expect((titles["notes"] as? [[String: Any]])?.count == 20)
    }
}
