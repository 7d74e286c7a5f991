@_exported public import Conveyor
