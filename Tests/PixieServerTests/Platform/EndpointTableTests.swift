import Foundation
import HTTPServer
import PixieServer
import PixieWire
import Testing

/// PixieWire's table of endpoints (``PixieWire/PixieAPI``) is what the server serves and what docs/openapi.yaml
/// documents, so the device's `PixieClient`, which calls the same table, reaches every route it names.
@Suite("PixieAPI: the server's routes and docs/openapi.yaml are exactly the table")
struct EndpointTableTests {
    @Test("a server with every service registers exactly the table's routes, each once")
    func theServerRegistersTheTable() throws {
        let fixture = try Fixture()
        let registered = fixture.router.registeredRoutes.map { "\($0.method.rawValue) \($0.pattern)" }
        let table = (PixieAPI.all + PixieAPI.platform).map { "\($0.method.rawValue) \($0.routePattern)" }
        #expect(Set(registered).count == registered.count, "a route is registered twice: \(registered.sorted())")
        #expect(registered.sorted() == table.sorted())
        let unlisted = Set(registered).subtracting(table).sorted()
        #expect(unlisted.isEmpty, "routes the table does not list: \(unlisted)")
        let unserved = Set(table).subtracting(registered).sorted()
        #expect(unserved.isEmpty, "endpoints the server does not serve: \(unserved)")
    }

    @Test("a server with some services registers only endpoints of the table")
    func everyServiceAloneRegistersOnlyTheTable() throws {
        let table = Set((PixieAPI.all + PixieAPI.platform).map { "\($0.method.rawValue) \($0.routePattern)" })
        for service in PixieConfiguration.Service.allCases {
            let fixture = try Fixture(services: [service])
            let registered = Set(fixture.router.registeredRoutes.map { "\($0.method.rawValue) \($0.pattern)" })
            #expect(registered.isSubset(of: table), "\(service): \(registered.subtracting(table).sorted())")
        }
    }

    @Test("docs/openapi.yaml documents exactly the table: each operation's path, method, operationId and scheme")
    func theDocumentIsTheTable() throws {
        let documented = try Self.documentedOperations()
        let table = PixieAPI.all + PixieAPI.platform
        #expect(Set(documented.keys) == Set(table.map(\.description)))
        for endpoint in table {
            let operation = try #require(documented[endpoint.description], "docs/openapi.yaml lacks \(endpoint)")
            #expect(operation.name == endpoint.name, "\(endpoint)")
            #expect(operation.schemes == endpoint.authorization.headerSchemes, "\(endpoint)")
        }
    }

    /// One operation of docs/openapi.yaml: its `operationId` and the schemes its `security` names.
    struct Operation {
        var name: String?
        var schemes: Set<String>?
    }

    static let httpMethods: Set<String> = ["get", "put", "post", "delete", "patch", "head", "options", "trace"]

    /// docs/openapi.yaml's operations by `METHOD /path`, read line by line from its `paths:` (the file is written
    /// with two-space indentation: a path at 2, its methods at 4, an operation's fields at 6, a `security` list's
    /// items at 8).
    static func documentedOperations() throws -> [String: Operation] {
        let file = ServerProcess.packageRoot.appendingPathComponent("docs/openapi.yaml")
        let text = try String(contentsOf: file, encoding: .utf8)
        var inPaths = false
        var path: String?
        var current: String?
        var inSecurity = false
        var operations: [String: Operation] = [:]
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if !line.isEmpty, !line.hasPrefix(" ") {
                inPaths = line == "paths:"
                path = nil
                current = nil
                continue
            }
            guard inPaths else { continue }
            if line.hasPrefix("  /"), line.hasSuffix(":") {
                path = String(line.dropFirst(2).dropLast())
                current = nil
                inSecurity = false
                continue
            }
            if line.hasPrefix("    "), !line.hasPrefix("     "), line.hasSuffix(":") {
                let key = String(line.dropFirst(4).dropLast())
                current = nil
                if Self.httpMethods.contains(key), let path {
                    let operation = "\(key.uppercased()) \(path)"
                    operations[operation] = Operation()
                    current = operation
                }
                inSecurity = false
                continue
            }
            guard let current else { continue }
            if line.hasPrefix("      "), !line.hasPrefix("       ") {
                let field = line.dropFirst(6)
                inSecurity = false
                if field.hasPrefix("operationId: ") {
                    operations[current]?.name = String(field.dropFirst("operationId: ".count))
                } else if field == "security: []" {
                    operations[current]?.schemes = []
                } else if field == "security:" {
                    operations[current]?.schemes = []
                    inSecurity = true
                }
                continue
            }
            if inSecurity, line.hasPrefix("        - "), line.hasSuffix(": []") {
                operations[current]?.schemes?.insert(String(line.dropFirst(10).dropLast(4)))
            } else if !line.hasPrefix("        ") {
                inSecurity = false
            }
        }
        guard !operations.isEmpty else {
            throw FixtureError("docs/openapi.yaml at \(file.path) has no operations under paths:")
        }
        return operations
    }
}
