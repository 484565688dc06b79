import CommandLineKit
import Foundation
import PixieDevice
import SiblingsCrypto

/// `pixie store`: the device store's rows, standing in for the app on this machine.
struct Store: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store", abstract: "Add, list and delete rows of this device's store.",
        discussion: "The categories and their fields:\n"
            + StoreCategory.allCases.map { category in
                "  \(category.rawValue): "
                    + category.columns.map { "\($0.name) (\($0.kind.rawValue))" }
                    .joined(separator: ", ")
            }.joined(separator: "\n")
            + "\nBlobs are hex. A field ending in _at that is left out is the current time (Unix seconds).",
        subcommands: [StoreAdd.self, StoreList.self, StoreDelete.self])
}

extension StoreCategory: ExpressibleByArgument {
    public init?(argument: String) { self.init(named: argument) }
    public static var valueName: String? { "category" }
}

/// The store of a device that is set up in `home`.
func openStore(_ home: String) throws -> DeviceStore {
    let home = try openHome(home)
    _ = try home.state()
    return try DeviceStore(home: home)
}

func storeJSON(_ row: StoreRow) -> [String: Any] {
    var object: [String: Any] = [
        "id": row.id, "version": row.version.description, "hlc": row.version.hlc,
        "author": row.version.author.description, "deleted": row.isDeleted,
    ]
    for (name, value) in row.fields {
        switch value {
        case .text(let text): object[name] = text
        case .integer(let integer): object[name] = integer
        case .blob: object[name] = value.description
        }
    }
    return object
}

struct StoreAdd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add", abstract: "Write a row: FIELD=VALUE for each of the category's fields.",
        discussion: "With --id of a row that exists, the row is changed: it gets a new version of this device's "
            + "clock (docs/pixie-sync.md, \"Versions\"), which the reconcile loop orders by.")

    @Option(name: .long("home"), help: "This device's directory.") var home: String
    @Argument(help: "The category (`pixie store --help` lists them).") var category: StoreCategory
    @Arguments(help: "FIELD=VALUE, one per field.") var assignments: [String]
    @OptionalOption(name: .long("id"), help: "The row's id (a new random one when left out).") var id: String?
    @Flag(name: .long("json"), help: "Print the row as JSON.") var json: Bool

    func fields() throws -> [String: StoreValue] {
        var fields: [String: StoreValue] = [:]
        for assignment in assignments {
            guard let equals = assignment.firstIndex(of: "=") else {
                throw ValidationError("\(assignment) is not FIELD=VALUE")
            }
            let name = String(assignment[..<equals])
            let text = String(assignment[assignment.index(after: equals)...])
            guard let column = category.columns.first(where: { $0.name == name }) else {
                throw ValidationError(
                    "\(category.rawValue) has no field \(name); its fields are "
                        + category.columns.map(\.name).joined(separator: ", "))
            }
            guard fields[name] == nil else { throw ValidationError("\(name) is given twice") }
            switch column.kind {
            case .text: fields[name] = .text(text)
            case .integer:
                guard let integer = Int64(text) else {
                    throw ValidationError("\(name) must be an integer, not \(text)")
                }
                fields[name] = .integer(integer)
            case .blob:
                guard let blob = try? Data(hexString: text) else {
                    throw ValidationError("\(name) must be hex, not \(text)")
                }
                fields[name] = .blob(blob)
            }
        }
        for column in category.columns where column.name.hasSuffix("_at") && fields[column.name] == nil {
            fields[column.name] = .integer(Int64(Date().timeIntervalSince1970))
        }
        return fields
    }

    func validate() throws { _ = try fields() }

    func run() async throws {
        try await reporting {
            let row = try openStore(home).put(category, id: id, fields: try fields())
            if json {
                try printJSON(storeJSON(row))
            } else {
                streams.out("\(row.category.rawValue) \(row.id), version \(row.version)")
            }
        }
    }
}

struct StoreList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List a category's rows, in the order they were first written.")

    @Option(name: .long("home"), help: "This device's directory.") var home: String
    @Argument(help: "The category.") var category: StoreCategory
    @Flag(name: .long("deleted"), help: "Include tombstones.") var deleted: Bool
    @Flag(name: .long("json"), help: "Print the rows as a JSON array.") var json: Bool

    func run() async throws {
        try await reporting {
            let rows = try openStore(home).rows(category, includingDeleted: deleted)
            if json {
                try printJSON(rows.map(storeJSON))
                return
            }
            for row in rows {
                let fields =
                    row.isDeleted
                    ? "(deleted)"
                    : category.columns.map {
                        "\($0.name)=\(category.isSecret && $0.name == "api_key" ? "…" : row[$0.name]?.description ?? "")"
                    }
                    .joined(separator: " ")
                streams.out("\(row.id) \(row.version) \(fields)")
            }
            streams.out("\(rows.count) row\(rows.count == 1 ? "" : "s") in \(category.rawValue).")
        }
    }
}

struct StoreDelete: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm", abstract: "Delete a row: it becomes a tombstone, with no content.",
        discussion: "Deleting a conversation deletes its messages too.")

    @Option(name: .long("home"), help: "This device's directory.") var home: String
    @Argument(help: "The category.") var category: StoreCategory
    @Argument(help: "The row's id.") var id: String

    func run() async throws {
        try await reporting {
            let row = try openStore(home).delete(category, id: id)
            streams.out("Deleted \(category.rawValue) \(row.id) (tombstone version \(row.version)).")
        }
    }
}
